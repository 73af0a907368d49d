// A cast's operand is typed on its own, as p4c types it: (bit<32>)(8 * (4 * n - 20)) computes in n's bit<9>, (bit<16>)-(c ? 2 : 3w1) negates a bit<3>, (bit<8>)(600 / 4) divides integers; the embedded target gave the operand the cast's type (refusing the first two).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<9> n; bit<7> pad; bit<32> r1; bit<16> r2; bit<8> r3; bit<8> x; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.r1 = (bit<32>)(8 * (4 * hdr.h.n - 20));
        hdr.h.r2 = (bit<16>)-((hdr.h.x == 1) ? 2 : 3w1);
        hdr.h.r3 = (bit<8>)(600 / 4);
        sm.egress_spec = 1;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
