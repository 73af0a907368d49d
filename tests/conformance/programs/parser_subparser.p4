// Sub-parsers: a parser declared at top level, instantiated twice inside the main parser and applied with out and inout arguments; its own select, its reject.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> v; }
header b_t { bit<8> v; }
parser Sub(packet_in pkt, out b_t b, inout bit<8> count) {
    state start {
        pkt.extract(b);
        count = count + 1;
        transition select(b.v) { 0xFF: reject; default: accept; }
    }
}
struct headers_t { a_t a; b_t b; b_t c; }
struct meta_t { bit<8> n; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    Sub() sub1;
    Sub() sub2;
    state start {
        pkt.extract(hdr.a);
        sub1.apply(pkt, hdr.b, meta.n);
        transition select(hdr.b.v) { 2: more; default: accept; }
    }
    state more { sub2.apply(pkt, hdr.c, meta.n); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.a.v = meta.n;
        std.egress_spec = hdr.b.isValid() ? 9w1 : 9w2;
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
