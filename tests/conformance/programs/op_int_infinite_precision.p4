// const int declarations are computed in infinite precision ((1 << 10) >> 8 is 4, 300 * 300 / 100 is 900) before a cast fixes the width; negative constants cast to bit.
#include <core.p4>
#include <v1model.p4>

const int SHIFTED = (1 << 10) >> 8;
const int BIG = 300 * 300 / 100;
header ops_t { bit<8> a; bit<8> r1; bit<8> r2; bit<16> r3; bit<8> r4; }
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
        hdr.o.r1 = hdr.o.a + (bit<8>) SHIFTED;
        hdr.o.r2 = (bit<8>) -1;
        hdr.o.r3 = (bit<16>) BIG;
        hdr.o.r4 = (bit<8>) (17 % 5);
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
