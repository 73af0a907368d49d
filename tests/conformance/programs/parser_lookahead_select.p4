// select on lookahead<bit<8>>() chooses the header type before extracting it; lookahead consumes nothing.
#include <core.p4>
#include <v1model.p4>

header short_t { bit<8> kind; bit<8> v; }
header long_t { bit<8> kind; bit<24> v; }
struct headers_t { short_t s; long_t l; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        transition select(pkt.lookahead<bit<8>>()) { 0x4C: parse_long; default: parse_short; }
    }
    state parse_long { pkt.extract(hdr.l); transition accept; }
    state parse_short { pkt.extract(hdr.s); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (hdr.l.isValid()) { hdr.l.v = hdr.l.v + 1; std.egress_spec = 1; }
        if (hdr.s.isValid()) { hdr.s.v = hdr.s.v + 1; std.egress_spec = 2; }
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
