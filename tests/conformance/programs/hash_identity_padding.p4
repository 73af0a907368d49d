// hash with HashAlgorithm.identity as BMv2 computes it: the field list's bytes (zero bits of padding at the end) read big-endian, padding included, the first 8 bytes only. {bit<3> a, bit<8> b} is (a ++ b) << 5; {bit<64> w, bit<8> c} is w. Found by the random differential test (hina.testing.p4smith, seed 2043): the embedded target took the list as a number, (a ++ b).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<3> a; bit<5> pad; bit<8> b; bit<64> w; bit<8> c; bit<16> r1; bit<32> r2; }
struct headers_t { h_t h; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        hash(hdr.h.r1, HashAlgorithm.identity, 16w0, { hdr.h.a, hdr.h.b }, 32w65536);
        hash(hdr.h.r2, HashAlgorithm.identity, 32w0, { hdr.h.w, hdr.h.c }, 64w4294967296);
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
