// == and != on whole header stacks (element by element, validity included) and on header unions.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> v; }
header b_t { bit<16> w; }
header o_t { bit<8> r; }
header_union u_t { a_t a; b_t b; }
struct headers_t { o_t o; a_t[2] s1; a_t[2] s2; u_t u1; u_t u2; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.o); pkt.extract(hdr.s1.next); pkt.extract(hdr.s2.next);
                  transition select(hdr.o.r) { 1: ua; default: accept; } }
    state ua { pkt.extract(hdr.u1.a); pkt.extract(hdr.u2.a); transition accept; }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        bit<8> r = 0;
        if (hdr.s1 == hdr.s2) { r = r | 1; }
        if (hdr.u1 == hdr.u2) { r = r | 2; }
        if (hdr.s1 != hdr.s2) { r = r | 4; }
        hdr.o.r = r;
    }
}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
