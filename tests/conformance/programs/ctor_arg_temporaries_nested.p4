// Externs p4c's MoveConstructors moves out of argument lists inside controls that have constructor parameters themselves. p4c's SpecializeAll first copies each control instantiated with simple constants (Inner(2), MyIngress(1) in main) and places the copy just before the control (or the main instance) holding the instantiation; Shared, instantiated with a struct value, is not copied: one declaration, so s1 and s2 each have a 'tmp', and Inner(k) in it (k a parameter there) is not copied either. MoveConstructors then numbers tmp, tmp_0, ... in that order: Inner, Shared, MyEgress, then the copies before main (Inner for x, MyIngress_0). The program's own names of that form that p4c keeps as written (a struct field tmp_1, a parameter tmp_0 of Acc, a parameter tmp of MyIngress, which p4c's copy MyIngress_0 keeps) are skipped: Inner's is tmp_2. The control plane reads the registers by those names.
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
struct headers_t { k_t k; }
struct meta_t { bit<8> tmp_1; }
struct cfg_t { bit<8> add; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control Acc(inout bit<8> tmp_0)(register<bit<8>> r, cfg_t cfg) {
    apply {
        bit<8> v;
        r.read(v, 0);
        v = v + cfg.add;
        r.write(0, v);
        tmp_0 = tmp_0 + v;
    }
}

control Inner(inout bit<8> res)(bit<8> k) {
    Acc(register<bit<8>>(1), (cfg_t) { k }) ia;
    apply { ia.apply(res); }
}

control Shared(inout bit<8> res)(cfg_t q, bit<8> k) {
    Acc(register<bit<8>>(1), q) sa;
    Inner(k) si;
    apply { sa.apply(res); si.apply(res); }
}

control MyIngress(inout headers_t hdr, inout meta_t tmp, inout standard_metadata_t std)(bit<9> port) {
    Inner(2) x;
    Shared((cfg_t) { 3 }, 4) s1;
    Shared((cfg_t) { 5 }, 6) s2;
    apply {
        std.egress_spec = port;
        x.apply(hdr.k.b);
        if (hdr.k.a == 1) {
            s1.apply(hdr.k.c);
        } else {
            s2.apply(hdr.k.d);
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    Acc(register<bit<8>>(1), (cfg_t) { 0x10 }) e;
    apply { e.apply(hdr.k.a); }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(1), MyEgress(), MyCompute(), MyDeparser()) main;
