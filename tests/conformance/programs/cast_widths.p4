// Casts: bit<8> to bit<16> zero-extends, bit<16> to bit<8> truncates, int<8> to int<16> sign-extends, int<16> to bit<16> keeps the bits.
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<8> a; bit<16> w; bit<16> zext; bit<8> trunc; bit<16> sext; bit<8> itob; bit<8> narrow_signed; }
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
        hdr.o.zext = (bit<16>) hdr.o.a;
        hdr.o.trunc = (bit<8>) hdr.o.w;
        hdr.o.sext = (bit<16>) (int<16>) (int<8>) hdr.o.a;
        hdr.o.itob = (bit<8>) ((int<8>) hdr.o.a >> 1);
        hdr.o.narrow_signed = (bit<8>) (int<8>) (int<16>) hdr.o.w;
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
