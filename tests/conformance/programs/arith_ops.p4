// Arithmetic on bit<N>: wrap-around, saturating add/sub, shifts, slices, concatenation, casts.
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<8> a; bit<8> b; bit<8> sum; bit<8> sat; bit<8> satsub; bit<8> shl; bit<16> cat; bit<4> hi; bit<4> lo; bit<8> neg; }
struct headers_t { ops_t o; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.o); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.o.sum = hdr.o.a + hdr.o.b;
        hdr.o.sat = hdr.o.a |+| hdr.o.b;
        hdr.o.satsub = hdr.o.b |-| hdr.o.a;
        hdr.o.shl = hdr.o.a << 3;
        hdr.o.cat = hdr.o.a ++ hdr.o.b;
        hdr.o.hi = hdr.o.a[7:4];
        hdr.o.lo = (bit<4>) hdr.o.b;
        hdr.o.neg = (bit<8>) (-(int<8>) hdr.o.a);
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
