// A serializable enum's value where its underlying type is expected (P4_16 8.11.2: the one
// implicit cast besides integer literals): a select case, an initializer, an operand of == and
// +. Also a header inside a metadata struct, a bool table key, a signed header field compared
// with a negative constant, a plain enum in metadata.
#include <core.p4>
#include <v1model.p4>

enum bit<8> kind_t { A = 1, B = 2 }
enum color_t { RED, GREEN }
header h_t { bit<8> k; int<8> s; bit<8> o; bit<8> p; }
header x_t { bit<8> v; }
struct inner_t { x_t x; bit<8> n; color_t c; }
struct headers_t { h_t h; }
struct meta_t { inner_t in1; bool flag; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.k) { kind_t.A: a; default: accept; }
    }
    state a { meta.flag = true; transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action set(bit<8> v) { hdr.h.o = v; }
    table t {
        key = { hdr.h.k: exact; meta.flag: exact; }
        actions = { set; NoAction; }
        default_action = NoAction();
    }
    apply {
        std.egress_spec = 1;
        meta.in1.x.setValid();
        meta.in1.x.v = 7;
        meta.in1.c = hdr.h.s < -1 ? color_t.RED : color_t.GREEN;
        t.apply();
        if (meta.in1.c == color_t.RED) { hdr.h.p = meta.in1.x.v; } else { hdr.h.p = (bit<8>) hdr.h.s; }
        if (meta.flag) { hdr.h.p = hdr.h.p + 0x10; }
        bit<8> e = kind_t.B;
        if (hdr.h.k == kind_t.B) { e = e + 1; }
        hdr.h.k = (e + kind_t.A) | 8w0x80;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
