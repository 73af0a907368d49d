// ++ concatenates: widths add, the left operand is the high part; int<8> ++ bit<8> is int<16>.
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<8> a; bit<4> b; bit<4> c; bit<16> ab; bit<16> ca; bit<16> sb; }
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
        hdr.o.ab = hdr.o.a ++ hdr.o.b ++ hdr.o.c;
        hdr.o.ca = (hdr.o.c ++ hdr.o.b) ++ hdr.o.a;
        hdr.o.sb = (bit<16>) (((int<8>) hdr.o.a) ++ 8w0x01);
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
