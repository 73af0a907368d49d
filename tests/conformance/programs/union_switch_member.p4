// Making another member of a header union valid (setValid, fields assigned) replaces the member on the wire.
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
    state start { pkt.extract(hdr.pre); pkt.extract(hdr.u.a); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (hdr.u.a.v == 0xFF) {
            hdr.u.b.setValid();
            hdr.u.b.kind = 2;
            hdr.u.b.v = 0xABCD;
        }
        std.egress_spec = hdr.u.a.isValid() ? 9w1 : 9w2;
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
