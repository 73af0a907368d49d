// An action parameter named like a parameter of its control (`meta`, `hdr`): p4c accepts it
// (with a shadowing warning) and the name means the action's own parameter inside the action;
// the control's `meta` is still the control's outside it.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
struct headers_t { h_t h; }
struct meta_t { bit<8> m; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    // `meta` here is the entry's argument, not the control's metadata
    action set_b(bit<8> meta) { hdr.h.b = meta; }
    // both names shadowed; the control's metadata is written only outside the action
    action set_r(bit<8> meta, bit<8> std) { hdr.h.r = meta + std; }
    table t {
        key = { hdr.h.a : exact; }
        actions = { set_b; set_r; NoAction; }
        default_action = NoAction();
    }
    apply {
        meta.m = 8w0x40;
        t.apply();
        hdr.h.s = meta.m;
        std.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {  }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
