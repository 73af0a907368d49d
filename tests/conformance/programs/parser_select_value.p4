// select on one field: each value goes to its own state, default to accept.
#include <core.p4>
#include <v1model.p4>

header tag_t { bit<8> kind; }
header w_t { bit<16> v; }
header b_t { bit<8> v; }
struct headers_t { tag_t tag; w_t w; b_t b; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.tag);
        transition select(hdr.tag.kind) { 1: parse_w; 2: parse_b; default: accept; }
    }
    state parse_w { pkt.extract(hdr.w); transition accept; }
    state parse_b { pkt.extract(hdr.b); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (hdr.w.isValid()) { std.egress_spec = 1; hdr.w.v = hdr.w.v + 1; }
        else if (hdr.b.isValid()) { std.egress_spec = 2; hdr.b.v = 0xBB; }
        else { std.egress_spec = 3; }
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
