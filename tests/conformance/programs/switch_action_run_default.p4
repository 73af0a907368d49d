// switch on action_run with a default label and an action with no case.
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
    action a1() { hdr.h.r = 1; }
    action a2() { hdr.h.r = 2; }
    action a3() { hdr.h.r = 3; }
    table t {
        key = { hdr.h.a: exact; }
        actions = { a1; a2; a3; }
        const entries = { 1: a1(); 2: a2(); 3: a3(); }
        default_action = a3();
    }
    apply {
        switch (t.apply().action_run) {
            a1: { hdr.h.s = 0x10; }
            default: { hdr.h.s = 0xDF; }
        }
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
