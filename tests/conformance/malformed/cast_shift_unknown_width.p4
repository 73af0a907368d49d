// error: 13: shift of an integer of unknown width by a run-time amount
// A run-time shift of an integer literal inside a cast: p4c refuses it (the cast gives the literal no width); the embedded target accepted it, the literal taking the cast's type.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> n; bit<32> r; }
struct headers_t { h_t h; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { hdr.h.r = (bit<32>)(1 << hdr.h.n); }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
