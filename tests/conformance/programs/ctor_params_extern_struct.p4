// Control constructor parameters of extern type (a register and a counter declared in the enclosing control, passed by name: both instances use that one object, which P4Info lists once under its own name; a counter and a register constructed in the argument list: each instance's own, named INSTANCE.PARAM as p4c names it) and of struct type (a cast initializer, a top-level struct constant; its fields are constants).
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> b; bit<8> res; bit<8> res2; }
struct headers_t { k_t k; }
struct meta_t {  }
struct cfg_t { bit<8> add; bit<8> mask; }

const cfg_t CFG2 = { add = 16, mask = 0xF0 };

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control Acc(inout headers_t hdr)(register<bit<8>> r, cfg_t cfg) {
    apply {
        bit<8> v;
        r.read(v, 0);
        v = v + cfg.add;
        r.write(0, v);
        hdr.k.res = v & cfg.mask;
        hdr.k.res2 = CFG2.add | cfg.add;
    }
}

control Cnt(inout headers_t hdr)(counter c) {
    apply { c.count((bit<32>) hdr.k.a); }
}

control Seq(inout headers_t hdr)(register<bit<8>> r) {
    apply {
        bit<8> v;
        r.read(v, 1);
        r.write(1, v + 1);
        hdr.k.b = v;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    register<bit<8>>(4) shared;
    counter(8, CounterType.packets) pk;
    Acc(shared, (cfg_t) { 1, 0xFF }) acc1;
    Acc(shared, CFG2) acc2;
    Cnt(pk) cnt;
    Cnt(counter(4, CounterType.bytes)) cnt_b;
    Seq(register<bit<8>>(2)) seq;
    apply {
        std.egress_spec = 1;
        if (hdr.k.a == 1) {
            acc1.apply(hdr);
        } else if (hdr.k.a == 2) {
            acc2.apply(hdr);
        }
        cnt.apply(hdr);
        if (hdr.k.a == 3) {
            cnt_b.apply(hdr);
            seq.apply(hdr);
        }
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
