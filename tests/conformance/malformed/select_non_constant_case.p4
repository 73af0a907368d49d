// error: 12: keyset expression is not a compile-time constant
// A select case that is not a compile-time constant.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers_t { h_t h; }
struct meta_t { }
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.a) {
            hdr.h.b: accept;
            default: accept;
        }
    }
}
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control Nop(inout headers_t hdr, inout meta_t meta) { apply { } }
control NopE(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), Nop(), MyIngress(), NopE(), Nop(), MyDeparser()) main;
