// A table with an exact key and an LPM key (one LPM key at most, v1model).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
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
    action set(bit<8> v) { hdr.h.r = v; }
    action set2(bit<8> v, bit<8> w) { hdr.h.r = v; hdr.h.s = w; }
    action miss() { hdr.h.r = 0xEE; }
    table t {
        key = { hdr.h.b: exact; hdr.h.a: lpm; }
        actions = { set; miss; }
        default_action = miss();
    }
    apply {
        std.egress_spec = 1;
        t.apply();
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
