// error: 41: type of argument 'wide'
// A register<bit<16>> passed for a constructor parameter of type register<bit<8>> (p4c: "Type of argument 'wide' (register<...>) does not match type of parameter 'r'").
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

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    register<bit<8>>(4) shared; register<bit<16>>(4) wide;
    counter(8, CounterType.packets) pk;
    Acc(shared, (cfg_t) { 1, 0xFF }) acc1;
    Acc(wide, CFG2) acc2;
    Cnt(pk) cnt;
    apply {
        std.egress_spec = 1;
        if (hdr.k.a == 1) {
            acc1.apply(hdr);
        } else if (hdr.k.a == 2) {
            acc2.apply(hdr);
        }
        cnt.apply(hdr);
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
