// exit in a control applied with out/inout arguments (nested twice): the arguments are still copied back, as BMv2 does (egress shows meta.m and meta.n).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> m; bit<8> n; bit<8> s; }
struct headers_t { h_t h; }
struct meta_t { bit<8> m; bit<8> n; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply {  } }

control Inner(inout bit<8> x, out bit<8> y, in bit<8> a) {
    apply {
        x = x + 1;
        y = 0x20;
        if (a == 1) { exit; }
        x = x + 0x10;
    }
}

control Outer(inout bit<8> x, out bit<8> y, in bit<8> a) {
    Inner() inner;
    apply {
        x = x + 0x40;
        inner.apply(x, y, a);
        x = x + 0x80;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    Outer() outer;
    apply {
        std.egress_spec = 1;
        meta.m = 1;
        meta.n = 2;
        outer.apply(meta.m, meta.n, hdr.h.a);
        hdr.h.s = 0x55;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { hdr.h.m = meta.m; hdr.h.n = meta.n; }
}
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
