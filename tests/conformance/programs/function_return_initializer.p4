// A function returning a header or a struct returns an initializer ({ a, b }), from more than one place: the caller gets a value of that type (the header valid); the embedded target returned a Python tuple and dropped the packet.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> v; bit<8> x; bit<8> y; }
header pair_t { bit<8> a; bit<8> b; }
struct two_t { bit<8> x; bit<8> y; }
struct headers_t { h_t h; pair_t p; }
struct meta_t { }

pair_t make_pair(in bit<8> v) {
    if (v > 10) {
        return { v, 8w1 };
    }
    return { 8w0, v };
}

two_t make_two(in bit<8> v) {
    return { v + 1, v + 2 };
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.p = make_pair(hdr.h.v);
        two_t t = make_two(hdr.h.v);
        hdr.h.x = t.x;
        hdr.h.y = t.y;
        sm.egress_spec = 1;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.p); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
