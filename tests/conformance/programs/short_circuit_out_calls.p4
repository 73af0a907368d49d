// && and || and ?: whose operand calls a function with inout parameters: the call (and its side effect) happens only when the operand is evaluated (P4_16 8.6), nested too; the embedded target refused these.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> k; bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; bit<8> f; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

bool bump(inout bit<8> x) {
    x = x + 1;
    return x[0:0] == 1;
}

bit<8> twice(inout bit<8> x) {
    x = x + x;
    return x;
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        bool r1 = hdr.h.k[0:0] == 1 && bump(hdr.h.a);
        bool r2 = hdr.h.k[1:1] == 1 || bump(hdr.h.b);
        hdr.h.c = hdr.h.k[2:2] == 1 ? twice(hdr.h.d) : 8w9;
        bool r3 = hdr.h.k[3:3] == 1 && (hdr.h.k[4:4] == 1 || bump(hdr.h.e));
        hdr.h.f = (r1 ? 8w1 : 8w0) | (r2 ? 8w2 : 8w0) | (r3 ? 8w4 : 8w0);
        sm.egress_spec = 1;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
