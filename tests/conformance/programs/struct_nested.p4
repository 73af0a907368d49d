// Nested structs in metadata: assignment of an inner struct copies it whole; metadata starts at zero.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
struct pair_t { bit<8> x; bit<8> y; }
struct outer_t { pair_t p; pair_t q; }
struct headers_t { h_t h; }
struct meta_t { outer_t o; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        meta.o.p.x = hdr.h.a;
        meta.o.p.y = hdr.h.b;
        meta.o.q = meta.o.p;
        meta.o.p.x = 0;
        hdr.h.r = meta.o.q.x + meta.o.p.x;
        hdr.h.s = meta.o.q.y;
        std.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
