// Externs constructed in the constructor arguments of instances p4c does not specialise (an argument that is a struct value, an error member or an extern instance named, not a simple constant): p4c's MoveConstructors declares each just before the instance in the enclosing control as tmp, tmp_0, tmp_1, ..., numbered over the program in declaration order (Outer's first: MyIngress.o.tmp; Unused, which nothing instantiates, is removed by p4c before and takes no number); the control plane reads them by those names.
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> b; bit<8> r1; bit<8> r2; bit<8> r3; }
struct headers_t { k_t k; }
struct meta_t {  }
struct cfg_t { bit<8> add; bit<8> mask; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
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
        res = v & cfg.mask;
    }
}

control Mixed(inout headers_t hdr)(register<bit<8>> r, counter c) {
    apply {
        bit<8> v;
        r.read(v, 1);
        r.write(1, v + 1);
        hdr.k.b = v;
        c.count((bit<32>) hdr.k.a);
    }
}

control ErrC(inout headers_t hdr)(counter c, error e) {
    apply {
        if (e == error.NoMatch) {
            c.count(1);
        }
    }
}

control Unused(inout headers_t hdr) {
    Acc(register<bit<8>>(5), (cfg_t) { 3, 0x0F }) never;
    apply { never.apply(hdr.k.r2); }
}

control Outer(inout headers_t hdr) {
    Acc(register<bit<8>>(2), (cfg_t) { 3, 0x0F }) inner;
    apply { inner.apply(hdr.k.r2); }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    register<bit<8>>(4) shared;
    Mixed(shared, counter(4, CounterType.packets)) m;
    ErrC(counter(2, CounterType.bytes), error.NoMatch) ec;
    Outer() o;
    Acc(register<bit<8>>(4), (cfg_t) { 1, 0xFF }) acc1;
    apply {
        std.egress_spec = 1;
        m.apply(hdr);
        ec.apply(hdr);
        if (hdr.k.a == 1) {
            acc1.apply(hdr.k.r1);
        } else {
            o.apply(hdr);
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    Acc(register<bit<8>>(8), (cfg_t) { 2, 0xF0 }) acc2;
    apply { acc2.apply(hdr.k.r3); }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
