// setInvalid on the valid member of a header union leaves the union invalid: nothing of it is emitted.
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
        hdr.u.a.setInvalid();
        std.egress_spec = hdr.u.isValid() ? 9w2 : 9w1;
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
