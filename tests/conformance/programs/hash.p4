// hash() with crc16, crc32 and identity over a field list, written into the frame.
#include <core.p4>
#include <v1model.p4>

header data_t { bit<32> a; bit<16> b; bit<16> h16; bit<32> h32; bit<32> id; }
struct headers_t { data_t d; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.d); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hash(hdr.d.h16, HashAlgorithm.crc16, 16w0, { hdr.d.a, hdr.d.b }, 17w65536);
        hash(hdr.d.h32, HashAlgorithm.crc32, 32w0, { hdr.d.a, hdr.d.b }, 33w4294967296);
        hash(hdr.d.id, HashAlgorithm.identity, 32w0, { hdr.d.a }, 33w4294967296);
        std.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
