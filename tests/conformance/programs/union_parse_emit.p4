// A header union parsed into one member by select; emit writes only the valid member; a field of it changed in ingress.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> kind; bit<8> v; }
header b_t { bit<8> kind; bit<16> v; }
header_union u_t { a_t a; b_t b; }
header p_t { bit<8> p; }
struct headers_t { p_t pre; u_t u; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.pre); transition select(pkt.lookahead<bit<8>>()) { 1: pa; 2: pb; } }
    state pa { pkt.extract(hdr.u.a); transition accept; }
    state pb { pkt.extract(hdr.u.b); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (hdr.u.a.isValid()) { hdr.u.a.v = hdr.u.a.v + 1; std.egress_spec = 1; }
        if (hdr.u.b.isValid()) { hdr.u.b.v = hdr.u.b.v + 1; std.egress_spec = 2; }
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
