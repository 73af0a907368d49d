// == and != on headers: equal when both invalid, or both valid with equal fields.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> v; bit<8> w; }
header o_t { bit<8> r; }
struct headers_t { o_t o; a_t x; a_t y; a_t z; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.o); pkt.extract(hdr.x); pkt.extract(hdr.y); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        bit<8> r = 0;
        if (hdr.x == hdr.y) { r = r | 1; }
        if (hdr.x != hdr.y) { r = r | 2; }
        a_t n1;
        n1.setInvalid();
        if (hdr.z == n1) { r = r | 4; }
        hdr.o.r = r;
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
