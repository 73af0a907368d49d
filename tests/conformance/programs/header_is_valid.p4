// isValid() in conditions and in a bool expression, after extraction, setValid and setInvalid.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> v; }
header b_t { bit<16> v; }
header o_t { bit<8> bits; }
struct headers_t { o_t o; a_t a; b_t b; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.o); pkt.extract(hdr.a); transition select(hdr.a.v) { 1: pb; default: accept; } }
    state pb { pkt.extract(hdr.b); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        bit<8> r = 0;
        if (hdr.a.isValid()) { r = r | 1; }
        if (hdr.b.isValid()) { r = r | 2; }
        bool both = hdr.a.isValid() && hdr.b.isValid();
        if (both) { r = r | 4; }
        hdr.b.setInvalid();
        if (!hdr.b.isValid()) { r = r | 8; }
        hdr.o.bits = r;
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
