// update_checksum_with_payload after truncate(): BMv2 computes the checksum over the payload as the cut leaves it (the deparser updates checksums over bm::Packet::get_data_size(), the truncated length, before the headers go in front), so the cut counts against the payload, not the frame.
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
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        truncate((bit<32>) hdr.c.b[7:0]);
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply { update_checksum_with_payload(hdr.c.isValid(), { hdr.c.a, hdr.c.b }, hdr.c.ck, HashAlgorithm.csum16); }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
