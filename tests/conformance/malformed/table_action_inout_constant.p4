// error: 26: is not an l-value
// A constant bound to an inout parameter in a table's actions list.
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
    bit<8> loc = 0;
    action set_out(out bit<8> o, bit<8> v) { o = v; }
    action acc(inout bit<8> x, bit<8> d) { x = x + d; }
    action both(inout bit<8> x, out bit<8> y) { y = x; x = 0xFF; }
    table t1 {
        key = { hdr.h.a: exact; }
        actions = { set_out(meta.m); acc(8w7); NoAction; }
        default_action = NoAction();
    }
    table t2 {
        key = { hdr.h.a: exact; }
        actions = { both(loc, hdr.h.s); NoAction; }
        default_action = NoAction();
    }
    apply {
        std.egress_spec = 1;
        meta.m = 3;
        hdr.h.s = meta.m;
        t1.apply();
        hdr.h.r = meta.m;
        loc = hdr.h.b;
        t2.apply();
        if (loc == 0xFF) { hdr.h.a = hdr.h.a | 0x80; }
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
