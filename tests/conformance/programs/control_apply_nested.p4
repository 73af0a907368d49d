// A control declared at top level, instantiated in ingress and applied twice with different arguments (in and inout parameters, its own table and action).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
control Add(in bit<8> k, inout bit<8> x) {
    action plus(bit<8> d) { x = x + d; }
    table t {
        key = { k: exact; }
        actions = { plus; NoAction; }
        const entries = { 1: plus(0x11); 2: plus(0x12); 5: plus(0x55); }
        default_action = NoAction();
    }
    apply { t.apply(); }
}
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
    Add() add1;
    Add() add2;
    apply {
        add1.apply(hdr.h.a, hdr.h.r);
        add2.apply(hdr.h.b, hdr.h.s);
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
