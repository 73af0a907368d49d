// Right shift of int<8> is arithmetic (sign fills in), also by the width and more; left shift of int<8> wraps.
#include <core.p4>
#include <v1model.p4>

header ops_t { int<8> a; bit<8> n; int<8> shr; int<8> shl; int<8> shr2; }
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
        hdr.o.shr = hdr.o.a >> hdr.o.n;
        hdr.o.shl = hdr.o.a << hdr.o.n;
        hdr.o.shr2 = hdr.o.a >> 2;
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
