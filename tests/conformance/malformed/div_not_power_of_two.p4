// error: 13: operator /: could not evaluate expression at compilation time (a run-time / needs a constant power of two on the right)
// Division by a constant not a power of two (p4c-bm2-ss computes / and % at compile time or as shifts only).
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<16> w; }
struct headers_t { h_t h; }
struct meta_t { bit<8> m; }
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.h.a = hdr.h.b / 3;
    }
}
control Nop(inout headers_t hdr, inout meta_t meta) { apply { } }
control NopE(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), Nop(), MyIngress(), NopE(), Nop(), MyDeparser()) main;
