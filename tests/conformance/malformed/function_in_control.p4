// error: 12: syntax error
// A function declared inside a control: P4_16 allows functions at the top level only.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_t eth; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); transition accept; } }
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { bit<8> twice(in bit<8> v) { return v << 1; }
    apply { hdr.eth.ether_type = (bit<16>) twice(8w3); }
}
control Nop(inout headers_t hdr, inout meta_t meta) { apply { } }
control NopE(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }

V1Switch(MyParser(), Nop(), MyIngress(), NopE(), Nop(), MyDeparser()) main;
