// standard_metadata.packet_length in egress after a local header is declared a second time in one packet while valid: an action with a local header called twice, a control with one applied twice. p4c-bm2-ss emits remove_header for each local header declared (the local lives on between the calls), so the second declaration takes the size off BMv2's length register before the second setValid adds it again: +3 once, not twice. A function's local is new at each call (p4c inlines the function per call): +3 twice.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<16> len_in; bit<16> len_eg; }
header x_t { bit<16> v; bit<8> w; }
struct headers_t { h_t h; x_t x; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

bit<16> fv(in bit<16> v) {
    x_t t;
    t.setValid();
    t.v = v;
    return t.v + 1;
}

control Loc(inout headers_t hdr) {
    apply {
        x_t t;
        t.setValid();
        t.v = (bit<16>) hdr.h.op + 0x100;
        t.w = 0x22;
        hdr.x = t;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    Loc() loc;
    action mk() {
        x_t t;
        t.setValid();
        t.v = (bit<16>) hdr.h.op + 0x10;
        t.w = 0x11;
        hdr.x = t;
    }
    apply {
        std.egress_spec = 1;
        hdr.h.len_in = (bit<16>) std.packet_length;
        if (hdr.h.op == 1) {            // the action's local: valid after the first call
            mk();
            mk();
        } else if (hdr.h.op == 2) {     // the control's local
            loc.apply(hdr);
            loc.apply(hdr);
        } else if (hdr.h.op == 3) {     // once: +3
            mk();
        } else if (hdr.h.op == 5) {     // a function's local: p4c inlines each call with a local of its own, +3 twice
            hdr.h.len_in = fv(hdr.h.len_in);
            hdr.h.len_in = fv(hdr.h.len_in);
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { hdr.h.len_eg = (bit<16>) std.packet_length; }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
