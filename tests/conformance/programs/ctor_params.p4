// Constructor parameters: a control and a parser instantiated with arguments (in V1Switch, nested, a parameter passed on), used as a select case and as a value; an extern instance declared in a parser.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
header t_t { bit<8> v; }
struct headers_t { h_t h; t_t t; }
struct meta_t { bit<8> m; }

parser Sub(packet_in pkt, inout headers_t hdr)(bit<8> tag) {
    state start { transition select(hdr.h.a) { tag: more; default: accept; } }
    state more { pkt.extract(hdr.t); transition accept; }
}

// a register declared in a parser: P4Info lists it, the control plane reads and writes it
// (p4c-bm2-ss refuses its methods in a parser state: malformed/register_call_in_parser)
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std)(bit<8> tag) {
    register<bit<8>>(4) seen;
    Sub(tag) sub;
    state start {
        pkt.extract(hdr.h);
        meta.m = hdr.h.a;
        sub.apply(pkt, hdr);
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply {  } }

control Adder(inout bit<8> x)(bit<8> k, bool twice) {
    action add() { x = x + k; }
    table t { key = { x: exact; } actions = { add; NoAction; } default_action = add(); }
    apply { t.apply(); if (twice) { x = x + k; } }
}

control Pair(inout headers_t hdr)(bit<8> k) {
    Adder(k, false) first;
    Adder(k + 1, true) second;
    apply { first.apply(hdr.h.r); second.apply(hdr.h.s); }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std)(bit<8> base) {
    Pair(base) p1;
    Pair(8w0x10) p2;
    apply {
        std.egress_spec = 1;
        hdr.h.r = meta.m;
        p1.apply(hdr);
        p2.apply(hdr);
        hdr.h.b = base;
    }
}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(8w7), MyVerify(), MyIngress(3), MyEgress(), MyCompute(), MyDeparser()) main;
