// A parser instantiated and applied inside another parser (a sub-parser with its own states).
// xfail-embedded: P4UnsupportedError: instantiations inside a parser (a sub-parser)
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> v; }
header b_t { bit<8> v; }
parser Sub(packet_in pkt, out b_t b) {
    state start { pkt.extract(b); transition accept; }
}
struct headers_t { a_t a; b_t b; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    Sub() sub;
    state start { pkt.extract(hdr.a); sub.apply(pkt, hdr.b); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.b.v = hdr.b.v + 1; std.egress_spec = 1;
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
