// / and % of bit<8> by powers of two (p4c-bm2-ss turns them into shifts and masks; other divisors are refused: malformed/div_not_power_of_two).
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<8> a; bit<8> d4; bit<8> m4; bit<8> d16; bit<8> m32; }
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
        hdr.o.d4 = hdr.o.a / 4;
        hdr.o.m4 = hdr.o.a % 4;
        hdr.o.d16 = hdr.o.a / 16;
        hdr.o.m32 = hdr.o.a % 32;
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
