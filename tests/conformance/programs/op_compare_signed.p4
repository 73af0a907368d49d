// Signed comparisons on int<8> (0x80 is -128, below 0x7F).
#include <core.p4>
#include <v1model.p4>

header ops_t { int<8> a; int<8> b; bit<8> lt; bit<8> le; bit<8> gt; bit<8> ge; }
struct headers_t { ops_t o; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.o); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.o.lt = hdr.o.a < hdr.o.b ? 8w1 : 8w0;
        hdr.o.le = hdr.o.a <= hdr.o.b ? 8w1 : 8w0;
        hdr.o.gt = hdr.o.a > hdr.o.b ? 8w1 : 8w0;
        hdr.o.ge = hdr.o.a >= hdr.o.b ? 8w1 : 8w0;
        std.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
