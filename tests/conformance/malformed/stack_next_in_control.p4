// error: 12: next of a header stack can only be used in a parser
// hs.next outside a parser.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct headers_t { h_t[2] s; }
struct meta_t { }
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.s.next); transition accept; }
}
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { hdr.s.next.a = 1; }
}
control Nop(inout headers_t hdr, inout meta_t meta) { apply { } }
control NopE(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), Nop(), MyIngress(), NopE(), Nop(), MyDeparser()) main;
