// A header union: one member extracted by the parser is valid, the other not; setValid on one invalidates the other.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header short_t { bit<16> v; }
header long_t { bit<32> v; }
header_union either_t { short_t s; long_t l; }
struct headers_t { ethernet_t eth; either_t u; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x0001: p_short; 0x0002: p_long; default: accept; }
    }
    state p_short { pkt.extract(hdr.u.s); transition accept; }
    state p_long { pkt.extract(hdr.u.l); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (hdr.u.s.isValid()) {
            std.egress_spec = 1;
            hdr.u.l.setValid();                       // the short member becomes invalid
            hdr.u.l.v = 32w0xABCD0000 | (bit<32>) hdr.eth.ether_type;
        } else if (hdr.u.l.isValid()) {
            std.egress_spec = 2;
        } else {
            std.egress_spec = 3;
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
