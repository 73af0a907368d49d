// Integer literals: width-prefixed (8w, 8s), hex, binary, octal, underscores, and a literal wider than the field truncated by a cast.
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<8> a; bit<8> w; bit<8> o; bit<8> sgn; bit<8> tr; bit<8> big; }
struct headers_t { ops_t o; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.o); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.o.w = hdr.o.a + 8w0b0000_0101;
        hdr.o.o = hdr.o.a ^ 8w0o17;
        hdr.o.sgn = (bit<8>) (-8s3);
        hdr.o.tr = (bit<8>) 16w0x1234;
        hdr.o.big = hdr.o.a + 0x_F_F;
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
