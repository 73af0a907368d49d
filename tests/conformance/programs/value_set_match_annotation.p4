// @match(ternary), @match(lpm) on the fields of a value_set's struct: p4c-bm2-ss writes the match types into P4Info and warns that BMv2 ignores them; BMv2 value sets match every field exactly, and so does the embedded target (the STF runner gives one value per field).
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<16> b; bit<8> c; }
struct headers_t { k_t k; }
struct meta_t {  }
struct pair_t { @match(ternary) bit<8> first; @match(lpm) bit<16> second; }

parser Inner(packet_in pkt, inout headers_t hdr) {
    value_set<pair_t>(2) pairs;
    state start {
        transition select(hdr.k.a, hdr.k.b) { pairs: member; (0xFF, _): all_ones; default: accept; }
    }
    state member { hdr.k.c = 0xEE; transition accept; }
    state all_ones { hdr.k.c = 0x11; transition accept; }
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    Inner() sub;
    state start {
        pkt.extract(hdr.k);
        sub.apply(pkt, hdr);
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
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
