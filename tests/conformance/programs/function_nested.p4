// Functions calling functions; a function with an if returning early; a bool function in a condition.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
bit<8> max8(in bit<8> x, in bit<8> y) { if (x > y) { return x; } return y; }
bit<8> min8(in bit<8> x, in bit<8> y) { return x < y ? x : y; }
bool is_small(in bit<8> x) { return x < 10; }
bit<8> clamp(in bit<8> x) { return min8(x, 100); }
struct headers_t { h_t h; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.h.r = max8(hdr.h.a, hdr.h.b) + min8(hdr.h.a, hdr.h.b);
        hdr.h.s = is_small(hdr.h.a) ? clamp(hdr.h.b) : 8w0xEE;
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
