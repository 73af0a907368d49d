// A header stack: parsed with next in a loop until the bottom-of-stack bit, popped, pushed and emitted.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header label_t { bit<20> label; bit<3> tc; bit<1> bos; bit<8> ttl; }
struct headers_t { ethernet_t eth; label_t[3] labels; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); transition select(hdr.eth.ether_type) { 0x8847: parse_label; default: accept; } }
    state parse_label {
        pkt.extract(hdr.labels.next);
        transition select(hdr.labels.last.bos) { 0: parse_label; 1: accept; }
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        if (hdr.labels[0].isValid() && hdr.labels[0].label == 100) {
            hdr.labels.pop_front(1);               // pop the outer label
        } else if (hdr.labels[0].isValid()) {
            hdr.labels.push_front(1);              // push a new outer label
            hdr.labels[0].setValid();
            hdr.labels[0] = { 20w7, 3w0, 1w0, 8w64 };
        }
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
