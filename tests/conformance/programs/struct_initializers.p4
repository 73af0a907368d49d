// Struct-valued expressions: a list { ... } and a named { x = ..., y = ... } initializer, structs compared with ==.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
struct pair_t { bit<8> x; bit<8> y; }
struct headers_t { h_t h; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        pair_t p = { hdr.h.a, hdr.h.b };
        pair_t q = { y = hdr.h.a, x = hdr.h.b };
        hdr.h.r = p.x - q.x;
        pair_t one_two = { x = 1, y = 2 };
        hdr.h.s = (p == one_two) ? 8w0xAA : 8w0xBB;
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
