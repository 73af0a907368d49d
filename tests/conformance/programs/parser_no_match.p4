// A select with no matching case and no default ends the parser with error.NoMatch (P4_16 spec, 12.6); ingress still runs and sees it.
// xfail-bmv2: p4c-bm2-ss leaves the default out of BMv2's parse state; BMv2 then ends the parser as accept with NoError (the spec says reject with error.NoMatch)
#include <core.p4>
#include <v1model.p4>

header tag_t { bit<8> kind; }
header b_t { bit<8> v; }
struct headers_t { tag_t tag; b_t b; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.tag);
        transition select(hdr.tag.kind) { 1: parse_b; 2: accept; }
    }
    state parse_b { pkt.extract(hdr.b); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (std.parser_error == error.NoError) { std.egress_spec = 1; }
        else if (std.parser_error == error.NoMatch) { std.egress_spec = 2; }
        else if (std.parser_error == error.PacketTooShort) { std.egress_spec = 3; }
        else if (std.parser_error == error.StackOutOfBounds) { std.egress_spec = 4; }
        else { std.egress_spec = 5; }
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
