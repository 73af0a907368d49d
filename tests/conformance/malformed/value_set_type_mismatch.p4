// error: 15: does not match the expected type
// A value_set<bit<16>> as a case of a select on a bit<8> field (p4c: the case label's type does not match).
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> b; }
struct headers_t { k_t k; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    value_set<bit<16>>(4) vs;
    state start {
        pkt.extract(hdr.k);
        transition select(hdr.k.a) { vs: member; 1: one; default: accept; }
    }
    state member { hdr.k.b = 0xEE; transition accept; }
    state one { hdr.k.b = 0x01; transition accept; }
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
