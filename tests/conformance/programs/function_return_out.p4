// A function that returns a value and has an out parameter, called inside an expression, in a condition and as a statement.
#include <core.p4>
#include <v1model.p4>

bit<8> twice(in bit<8> v, out bit<8> half) { half = v >> 1; return v << 1; }
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_t eth; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        bit<8> half;
        bit<8> t = twice(8w6, half) + 1;
        hdr.eth.ether_type = t ++ half;           // 13, 3
        bit<8> half2;
        twice(hdr.eth.src[7:0], half2);           // as a statement: the value is dropped
        if (twice(half2, half) > 8w4) {           // in a condition: half2 = 0x11 -> 0x22 > 4
            hdr.eth.src[15:8] = half;             // 0x08
        }
        hdr.eth.src[7:0] = half2;
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
