// Operator precedence without parentheses: * over +, + over <<, << over &, & over ^ over |, comparisons over &&.
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<8> a; bit<8> b; bit<8> c; bit<8> p1; bit<8> p2; bit<8> p3; bit<8> p4; bit<8> p5; }
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
        hdr.o.p1 = hdr.o.a + hdr.o.b * hdr.o.c;
        hdr.o.p2 = hdr.o.a + hdr.o.b << 1;
        hdr.o.p3 = hdr.o.a | hdr.o.b ^ hdr.o.c & 8w0x0F;
        hdr.o.p4 = hdr.o.a - hdr.o.b - hdr.o.c;
        hdr.o.p5 = hdr.o.a == 1 || hdr.o.b == 2 && hdr.o.c == 3 ? 8w1 : 8w0;
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
