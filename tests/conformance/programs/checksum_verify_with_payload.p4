// verify_checksum_with_payload: a wrong checksum sets standard_metadata.checksum_error; a right one leaves it 0.
#include <core.p4>
#include <v1model.p4>

header c_t { bit<16> a; bit<16> b; bit<16> ck; }
struct headers_t { c_t c; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.c); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { verify_checksum_with_payload(hdr.c.isValid(), { hdr.c.a, hdr.c.b }, hdr.c.ck, HashAlgorithm.csum16); }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = std.checksum_error == 1 ? 9w2 : 9w1;
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
