// A table with const entries: range and exact keys, entry order deciding among overlapping ranges.
#include <core.p4>
#include <v1model.p4>

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
    action forward(bit<9> port) { std.egress_spec = port; }
    action drop() { mark_to_drop(std); }
        table by_type {
            key = { hdr.eth.ether_type: range; hdr.eth.dst[7:0]: exact; }
            actions = { forward; drop; }
            default_action = drop();
            const entries = {
                (0x0000 .. 0x05FF, 0x01): forward(1);
                (0x0600 .. 0x0FFF, 0x01): forward(2);
                (0x0000 .. 0xFFFF, 0x01): forward(3);
            }
        }
        apply { by_type.apply(); }
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
