// update_checksum with a false condition leaves the checksum field as it was; csum16 over a list with a bit<8> pair.
#include <core.p4>
#include <v1model.p4>

header c_t { bit<8> f; bit<8> g; bit<16> x; bit<16> ck; }
struct headers_t { c_t c; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.c); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply { update_checksum(hdr.c.f == 1, { hdr.c.f, hdr.c.g, hdr.c.x }, hdr.c.ck, HashAlgorithm.csum16); }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
