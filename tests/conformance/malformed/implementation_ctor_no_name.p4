// error: 26: anonymous table property 'implementation'
// p4c-p4runtime: Table 'MyIngress.t' has an anonymous table property 'implementation' with no name annotation
// A table's implementation written as a constructor call without @name: p4c-bm2-ss compiles the JSON (naming it action_profile_0) but writes no P4Info, and names no line.
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> res; }
struct headers_t { k_t k; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action set_out(bit<8> v, bit<9> port) { hdr.k.res = v; std.egress_spec = port; }
    action mark(bit<8> v) { hdr.k.res = v; }
    table t {
        key = { hdr.k.a: exact; }
        actions = { set_out; mark; }
        implementation = action_profile(32w4);
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

