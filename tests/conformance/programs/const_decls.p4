// Top-level and local const declarations, computed at compile time from other constants (infinite-precision int arithmetic folded).
#include <core.p4>
#include <v1model.p4>

const bit<8> K1 = 2 * 3 + 1;
const int K2I = 256 * 3 - 1;
const bit<16> K2 = K2I;
header ops_t { bit<8> a; bit<8> c1; bit<16> c2; bit<8> c3; }
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
    const bit<8> LOCAL = (bit<8>) (K1 * 8 + 4) & 8w0x3C;
    apply {
        hdr.o.c1 = hdr.o.a + K1;
        hdr.o.c2 = K2;
        hdr.o.c3 = hdr.o.a & LOCAL;
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
