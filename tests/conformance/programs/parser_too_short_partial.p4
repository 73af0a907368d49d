// PacketTooShort in a later state: headers extracted before stay valid and are emitted, the short one is not; the unparsed bytes follow as payload.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> v; }
header b_t { bit<128> v; }
struct headers_t { a_t a; b_t b; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.a); transition next; }
    state next { pkt.extract(hdr.b); transition accept; }
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
        hdr.a.v = hdr.b.isValid() ? 8w0xBB : 8w0xAA;
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
