// Parser select with masks, ranges, a tuple key and default.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header tag_t { bit<8> v; }
struct headers_t { ethernet_t eth; tag_t tag; }
struct meta_t { bit<8> path; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type, hdr.eth.dst[7:0]) {
            (0x8800 &&& 0xFF00, 0x01): low;
            (0x9000 .. 0x90FF, _): mid;
            (_, 0xFF): bcast;
            default: accept;
        }
    }
    state low { meta.path = 1; transition accept; }
    state mid { meta.path = 2; transition accept; }
    state bcast { meta.path = 3; transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { std.egress_spec = (bit<9>) meta.path; }
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
