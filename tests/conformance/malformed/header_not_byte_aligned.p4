// error: 7: not a multiple of 8
// A header whose width is not a whole number of bytes (BMv2's p4c backend refuses it).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header odd_t { bit<7> v; }
struct headers_t { ethernet_t eth; odd_t odd; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}
control Nop(inout headers_t hdr, inout meta_t meta) { apply { } }
control NopE(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }

V1Switch(MyParser(), Nop(), MyIngress(), NopE(), Nop(), MyDeparser()) main;
