// recirculate_preserving_field_list: the deparsed packet enters the parser again (instance_type 4 in ingress), with the annotated metadata kept.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_t eth; }
struct meta_t { @field_list(1) bit<8> passes; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (std.instance_type == 4) {
            std.egress_spec = 3;
            hdr.eth.ether_type = hdr.eth.ether_type + (bit<16>) meta.passes;
        } else {
            std.egress_spec = 1;
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (hdr.eth.ether_type == 0x0800) {      // the first pass only
            hdr.eth.ether_type = 0x1000;
            meta.passes = 5;
            recirculate_preserving_field_list(1);
        }
    }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
