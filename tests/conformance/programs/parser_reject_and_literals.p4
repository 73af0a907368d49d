// `transition reject` without `verify`: BMv2 runs ingress with the headers extracted so far and
// parser_error NoError; integer literals with '_' separators, a width given by a constant
// expression (`bit<(W * 2)>`), `minSizeInBits()` of a header, a stack filled in a loop.
#include <core.p4>
#include <v1model.p4>
const bit<32> W = 4;
header h_t { bit<8> k; bit<8> a; bit<16> b; bit<32> c; }
header s_t { bit<8> v; }
struct headers_t { h_t h; s_t[3] s; }
struct meta_t { bit<(W * 2)> wide; }
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition select(hdr.h.k) { 0xFF: reject; 0x01: stack; default: accept; } }
    state stack { pkt.extract(hdr.s.next); transition select(hdr.s.last.v) { 0: accept; default: stack; } }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    register<bit<16>>(4) r;
    counter(4, CounterType.packets) c;
    apply {
        std.egress_spec = 1;
        meta.wide = 8w1_0;
        hdr.h.a = meta.wide;
        hdr.h.c = hdr.h.minSizeInBits() + (std.parser_error == error.NoError ? 32w0 : 32w1);
        bit<16> x;
        r.read(x, (bit<32>) hdr.h.k[1:0]);
        r.write((bit<32>) hdr.h.k[1:0], x + 16w1_000);
        hdr.h.b = x;
        c.count((bit<32>) hdr.h.k[1:0]);
    }
}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.s); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
