// error: 12: Program can not be implemented on this target since it contains a path from table t back to itself
// A table applied twice on one path: p4c-bm2-ss cannot lay it out.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<16> w; }
struct headers_t { h_t h; }
struct meta_t { bit<8> m; }
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    table t {
        key = { hdr.h.a: exact; }
        actions = { NoAction; }
    }
    apply {
        t.apply();
        t.apply();
    }
}
control Nop(inout headers_t hdr, inout meta_t meta) { apply { } }
control NopE(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), Nop(), MyIngress(), NopE(), Nop(), MyDeparser()) main;
