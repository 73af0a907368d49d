// int<8> casts of bit<8> fields as operands of -, |-|, |+|, * and comparisons (the embedded target once mis-parenthesised a signed wrap used as a right operand: a - (b - 256) became a - b - 256).
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<8> a; bit<8> b; bit<8> sub; bit<8> ssub; bit<8> sadd; bit<8> mul; bit<8> self; bit<8> lt; }
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
        hdr.o.sub = (bit<8>) (((int<8>) hdr.o.a) - ((int<8>) hdr.o.b));
        hdr.o.ssub = (bit<8>) (((int<8>) hdr.o.a) |-| ((int<8>) hdr.o.b));
        hdr.o.sadd = (bit<8>) (((int<8>) hdr.o.a) |+| ((int<8>) hdr.o.b));
        hdr.o.mul = (bit<8>) (((int<8>) hdr.o.a) * ((int<8>) hdr.o.b));
        hdr.o.self = (bit<8>) (((int<8>) hdr.o.a) |-| ((int<8>) hdr.o.a));
        hdr.o.lt = ((int<8>) hdr.o.a) < ((int<8>) hdr.o.b) ? 8w1 : 8w0;
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
