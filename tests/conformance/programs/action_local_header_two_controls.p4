// An action declared at top level with a local header, called from two controls (MyIngress directly, and Sub, instantiated twice, directly and through a table): p4c's LocalizeAllActions gives each control its own copy of the action, and each call in it (FindRepeatedActionUses) one more, and inlining each control instance its own: the local header is one per call and control instance (MyIngress's two calls of mark and two of mark0, s1's and s2's call and table). The same through an action declared in MyIngress called twice (via: p4c inlines mark0 into it, then copies via per call), where via's own local would be one for both calls. An action declared in a control shares its local header among its calls (programs/packet_length_local_redeclared). p4c-bm2-ss emits remove_header for the declaration, so a call takes the header's size off BMv2's length register only when its own header is still valid from an earlier run in the packet; setValid adds it. Egress reads the register as packet_length.
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> op; bit<8> c; bit<16> len_eg; }
header x_t { bit<16> v; bit<8> w; }
struct headers_t { k_t k; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

action mark(inout bit<8> c) {
    x_t t;
    t.setValid();
    t.v = 1;
    c = c + 1;
}

action mark0() {
    x_t u;
    u.setValid();
    u.w = 2;
}

control Sub(inout headers_t hdr) {
    table tb {
        actions = { mark0; }
        default_action = mark0();
    }
    apply {
        mark(hdr.k.c);
        if (hdr.k.op & 0x20 != 0) {
            tb.apply();
        }
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    Sub() s1;
    Sub() s2;
    action via() { mark0(); }
    apply {
        std.egress_spec = 1;
        if (hdr.k.op & 0x01 != 0) { mark(hdr.k.c); }
        if (hdr.k.op & 0x02 != 0) { s1.apply(hdr); }
        if (hdr.k.op & 0x04 != 0) { s2.apply(hdr); }
        if (hdr.k.op & 0x08 != 0) { mark(hdr.k.c); }
        if (hdr.k.op & 0x10 != 0) {
            mark0();
            mark0();
        }
        if (hdr.k.op & 0x40 != 0) {
            via();
            via();
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { hdr.k.len_eg = (bit<16>) std.packet_length; }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
