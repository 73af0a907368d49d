// A function called in an expression with initializers for its struct and header parameters (f({ a, 3 }), g({ { 5, 6, 7 } })): the callee gets values of those types; the embedded target passed Python tuples and dropped the packet.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> s; }
struct pair_t { bit<8> a; bit<8> b; }
struct wrap_t { h_t h; }
struct headers_t { h_t h; }
struct meta_t { }

bit<8> sum(in pair_t p) {
    return p.a + p.b;
}

bit<8> first_if_valid(in wrap_t w) {
    return w.h.isValid() ? w.h.a : 8w0;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.s = sum({ hdr.h.a, 8w3 }) + first_if_valid({ { hdr.h.b, 8w6, 8w7 } });
        sm.egress_spec = 1;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
