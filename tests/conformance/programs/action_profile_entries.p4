// Initial entries (const and not) in tables with an action profile: p4c-bm2-ss accepts them and writes them nowhere in BMv2's JSON (P4Info still says is_const_table / has_initial_entries), so on BMv2 they never match; the embedded target does the same. The control plane adds member entries to the non-const table.
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
    action_profile(32w4) prof;
    action set_out(bit<8> v, bit<9> port) { hdr.k.res = v; std.egress_spec = port; }
    action mark(bit<8> v) { hdr.k.res = v; }
    table t {
        key = { hdr.k.a: exact; }
        actions = { set_out; mark; }
        const entries = { 1 : set_out(0x11, 2); 2 : mark(0x22); }
        implementation = prof;
    }
    table t2 {
        key = { hdr.k.a: exact; }
        actions = { set_out; mark; }
        entries = { 3 : mark(0x33); }
        @name("prof2") implementation = action_profile(32w4);
    }
    apply {
        std.egress_spec = 1;
        if (hdr.k.a < 3) { t.apply(); } else { t2.apply(); }
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
