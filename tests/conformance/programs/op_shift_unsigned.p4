// Shifts on bit<8> by constants and by a field, including amounts of the width and more (the result is 0).
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<8> a; bit<8> n; bit<8> shl; bit<8> shr; bit<8> shl3; bit<8> shr9; bit<8> shl8; }
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
        hdr.o.shl = hdr.o.a << hdr.o.n;
        hdr.o.shr = hdr.o.a >> hdr.o.n;
        hdr.o.shl3 = hdr.o.a << 3;
        hdr.o.shr9 = hdr.o.a >> 9;
        hdr.o.shl8 = hdr.o.a << 8;
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
