// Indexed counter (packets and bytes) and a table's direct counter.
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
        counter(8, CounterType.packets_and_bytes) port_rx;
        direct_counter(CounterType.packets) hits;
        table fwd {
            key = { hdr.eth.dst: exact; }
            actions = { forward; drop; }
            default_action = drop();
            counters = hits;
        }
        apply { port_rx.count((bit<32>) std.ingress_port); fwd.apply(); }
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
