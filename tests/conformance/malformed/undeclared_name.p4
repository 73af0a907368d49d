// error: 15: undeclared identifier
// A name that was never declared.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }

struct headers_t { ethernet_t eth; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { hdr.eth.ether_type = nosuch; }
}
control Nop(inout headers_t hdr, inout meta_t meta) { apply { } }
control NopE(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }

V1Switch(MyParser(), Nop(), MyIngress(), NopE(), Nop(), MyDeparser()) main;
