// switch on table.apply().action_run and if on apply().hit/miss.
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
    action a1() { }
    action a2() { }
    table sel { key = { hdr.eth.dst: exact; } actions = { a1; a2; NoAction; } default_action = NoAction(); }
    table probe { key = { hdr.eth.src: exact; } actions = { NoAction; } default_action = NoAction(); }
    apply {
        switch (sel.apply().action_run) {
            a1: { std.egress_spec = 1; }
            a2: { std.egress_spec = 2; }
            default: { std.egress_spec = 3; }
        }
        if (probe.apply().hit) { hdr.eth.ether_type = 0x1111; } else { hdr.eth.ether_type = 0x2222; }
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
