// bit<128> fields: +, ^, >> and a slice across the 64-bit boundary.
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<128> a; bit<128> b; bit<128> add; bit<128> x; bit<128> shr; bit<16> mid; }
struct headers_t { ops_t o; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.o); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.o.add = hdr.o.a + hdr.o.b;
        hdr.o.x = hdr.o.a ^ hdr.o.b;
        hdr.o.shr = hdr.o.a >> 60;
        hdr.o.mid = hdr.o.a[71:56];
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
