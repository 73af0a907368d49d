// p4c's SideEffectOrdering declares temporaries (tmp, tmp_0, ...) before MoveConstructors numbers the externs it moves out of argument lists, so these come after them. Counted as p4c-bm2-ss 1.2.5.16 does (each count checked with --p4runtime-files): a select with a call in its keys, one per call and one per key (2 here); an if in a parser state as a select on its condition (p4c's RemoveParserIfs: 3 for lookahead == 0xA0); an if condition, one per call but isValid(), per binary operation over a call and per ?: (3 for mx(..) + 1 == 3, 1 for the ?:; c ? true : false would make none, p4c simplifies it to c); a call whose out/inout argument may alias another argument, one (both(c, c)). Ten in all: the moved registers are MyIngress.tmp_9 and MyEgress.tmp_10, which the control plane reads.
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> b; bit<8> c; bit<8> r1; bit<8> r2; }
struct headers_t { k_t k; }
struct meta_t {  }
struct cfg_t { bit<8> add; }

bit<8> mx(in bit<8> x, in bit<8> y) {
    if (x > y) {
        return x;
    }
    return y;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        transition select(pkt.lookahead<bit<8>>()) {
            0xEE: marked;
            default: plain;
        }
    }
    state marked { pkt.extract(hdr.k); hdr.k.c = 0x70; transition accept; }
    state plain {
        pkt.extract(hdr.k);
        if (pkt.lookahead<bit<8>>() == 0xA0) {
            hdr.k.b = hdr.k.b + 1;
        }
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control Acc(inout bit<8> res)(register<bit<8>> r, cfg_t cfg) {
    apply {
        bit<8> v;
        r.read(v, 0);
        v = v + cfg.add;
        r.write(0, v);
        res = v;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    Acc(register<bit<8>>(1), (cfg_t) { 1 }) acc1;
    action both(inout bit<8> x, in bit<8> y) { x = x + y; }
    apply {
        std.egress_spec = 1;
        if (mx(hdr.k.a, hdr.k.b) + 1 == 3) {
            acc1.apply(hdr.k.r1);
        }
        if (hdr.k.b == 7 ? hdr.k.a == 1 : hdr.k.a == 2) {
            both(hdr.k.c, hdr.k.c);
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    Acc(register<bit<8>>(1), (cfg_t) { 0x10 }) acc2;
    apply { acc2.apply(hdr.k.r2); }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
