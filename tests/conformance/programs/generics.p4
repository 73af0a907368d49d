// Generic types and functions: header and struct types with type parameters (two instances of one, nested), functions with type parameters inferred (from T and from pair_t<T>) or given, with inout T parameters and T locals.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<16> w; }
header gh_t<T> { T v; bit<8> tag; }
struct pair_t<T> { T first; T second; }
struct box_t<T, U> { T t; U u; pair_t<U> p; }
struct headers_t { h_t h; gh_t<bit<16>> g; gh_t<bit<8>> g8; }
struct meta_t {  }

T pick<T>(in bool which, in T a, in T b) {
    if (which) { return a; }
    return b;
}

void swap<T>(inout T a, inout T b) {
    T t = a;
    a = b;
    b = t;
}

T first_of<T>(in pair_t<T> p) {
    pair_t<T> q = p;
    return q.first;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); pkt.extract(hdr.g); transition accept; }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        pair_t<bit<8>> p = { hdr.h.a, hdr.h.b };
        box_t<bit<16>, bit<8>> bx = { hdr.h.w, 3, { 1, 2 } };
        hdr.h.a = pick(hdr.h.a > hdr.h.b, hdr.h.a, hdr.h.b);
        hdr.h.w = pick<bit<16>>(false, 16w1, hdr.g.v);
        swap(p.first, p.second);
        hdr.h.b = p.second;
        hdr.g.v = bx.t + (bit<16>) bx.p.second;
        hdr.g8.setValid();
        hdr.g8.v = first_of(p) + 9;
        hdr.g8.tag = bx.u;
    }
}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
