// A stack of header unions parsed in a loop, each element holding one member or the other.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> kind; bit<8> v; }
header b_t { bit<8> kind; bit<16> v; }
header_union u_t { a_t a; b_t b; }
header p_t { bit<8> p; }
struct headers_t { p_t pre; u_t[3] us; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.pre); transition body; }
    state body { transition select(pkt.lookahead<bit<8>>()) { 1: pa; 2: pb; default: accept; } }
    state pa { pkt.extract(hdr.us.next.a); transition body; }
    state pb { pkt.extract(hdr.us.next.b); transition body; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (hdr.us[1].b.isValid()) { hdr.us[1].b.v = 0xEEEE; }
        std.egress_spec = 1;
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
