// error: 27: match the expected model
// A package other than V1Switch for main (p4c-bm2-ss: v1model's main package must be V1Switch; it warns "the main package should be called V1Switch" at the package declaration).
#include <core.p4>
#include <v1model.p4>
header k_t { bit<8> a; bit<8> b; bit<8> r1; bit<8> r2; bit<8> r3; }
struct headers_t { k_t k; }
struct meta_t {  }
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply {  } }
control T(inout headers_t hdr)(tuple<bit<8>, bit<8>, bool> t) {
    apply {
        hdr.k.b = t[0] + t[1];
        if (t[2]) { hdr.k.r1 = hdr.k.a ^ t[0]; }
    }
}
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    T({ 8w3, 8w4, true }) t;
    T({ 8w250, 8w10, false }) t2;
    apply { std.egress_spec = 1; if (hdr.k.a == 1) { t.apply(hdr); } else { t2.apply(hdr); } }
}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
package P(Ingress<headers_t, meta_t> ig);
P(MyIngress()) main;
