// bit<1> and bit<2> fields: + wraps, ~ flips, ++ packs them.
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<1> a; bit<1> b; bit<2> c; bit<4> d; bit<1> sum; bit<1> inv; bit<2> c3; bit<4> pack; }
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
        hdr.o.sum = hdr.o.a + hdr.o.b;
        hdr.o.inv = ~hdr.o.a;
        hdr.o.c3 = hdr.o.c + 3;
        hdr.o.pack = hdr.o.a ++ hdr.o.b ++ hdr.o.c;
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
