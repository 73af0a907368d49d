// Extracting next into a full header stack ends the parser with error.StackOutOfBounds.
#include <core.p4>
#include <v1model.p4>

header e_t { bit<8> v; bit<8> more; }
struct headers_t { e_t[2] s; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.s.next);
        transition select(hdr.s.last.more) { 0: accept; default: start; }
    }
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
