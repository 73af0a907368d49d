// Parser lookahead<T>() to choose a state without consuming, and verify() rejecting with a program-declared error.
#include <core.p4>
#include <v1model.p4>

error { BadVersion }
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ver_t { bit<4> version; bit<4> rest; }
struct headers_t { ethernet_t eth; ver_t ver; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.eth);
        transition select(pkt.lookahead<bit<4>>()) { 4: v4; default: other; }
    }
    state v4 { pkt.extract(hdr.ver); transition accept; }
    state other {
        pkt.extract(hdr.ver);
        verify(hdr.ver.version == 6, error.BadVersion);
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (std.parser_error == error.BadVersion) { std.egress_spec = 3; }
        else if (hdr.ver.version == 4) { std.egress_spec = 1; }
        else { std.egress_spec = 2; }
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
