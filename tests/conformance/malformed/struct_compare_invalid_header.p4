// error: 23: cannot infer the type of an invalid header
// {#} (an invalid header) compared with a struct.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> v; bit<8> w; }
header o_t { bit<8> r; }
struct pair_t { bit<8> v; bit<8> w; }
struct nest_t { pair_t p; bit<8> z; }
struct headers_t { o_t o; a_t x; a_t y; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.o); pkt.extract(hdr.x); transition accept; }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        bit<8> r = 0;
        pair_t p = { hdr.x.v, hdr.x.w };
        nest_t n = { p, 3 };
        if (p == {#}) { r = r | 1; }
        if (p != { 8w1, hdr.o.r }) { r = r | 2; }
        if (p == { v = 1, w = 2 }) { r = r | 4; }
        if (n == { { 1, 2 }, 3 }) { r = r | 8; }
        if (hdr.x == { 1, 2 }) { r = r | 16; }
        if (hdr.y == (a_t){#}) { r = r | 32; }
        if (hdr.x == {#}) { r = r | 64; }
        hdr.o.r = r;
        std.egress_spec = 1;
    }
}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
