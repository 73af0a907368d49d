// A select case whose keyset matches every value (8w0 .. 8w255, the whole range) is a case like any other: the first case that matches wins (P4_16 spec, 12.6), so it takes every packet no earlier case took, and later cases and the default get none. Found by the random differential test (hina.testing.p4smith, seed 121, on a bit<1> field: 1w0 .. 1w1).
// xfail-bmv2: p4c-bm2-ss writes such a case as a "default" transition (the range expands to a mask of 0) of BMv2's parse state and BMv2 keeps only the last default (the select's own): the case never matches, later cases and the default take its packets
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
        transition select(hdr.tag.kind) {
            8w1: accept;
            8w0 .. 8w255: parse_b;
            8w5: accept;
            default: accept;
        }
    }
    state parse_b { pkt.extract(hdr.b); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (hdr.b.isValid()) { std.egress_spec = 2; hdr.b.v = hdr.b.v + 1; }
        else { std.egress_spec = 1; }
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
