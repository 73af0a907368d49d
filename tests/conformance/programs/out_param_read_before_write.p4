// An out parameter of bit type read before it is written (and one never written): the value is unspecified, but the packet goes on; the embedded target dropped it (its out parameters started as no value at all).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

bit<8> untouched(out bit<8> o) {
    return 8w3;
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action copy_then_set(out bit<8> o, out bit<8> seen) {
        seen = o;
        o = 8w7;
    }
    apply {
        copy_then_set(hdr.h.a, hdr.h.b);
        hdr.h.c = untouched(hdr.h.d);
        hdr.h.e = hdr.h.e + 1;
        sm.egress_spec = 1;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
