// Bit slices [h:l] of bit<16> fields, one bit, the whole field, and a slice of a slice.
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<16> a; bit<8> hi; bit<8> mid; bit<8> one; bit<16> whole; bit<8> nest; }
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
        hdr.o.hi = hdr.o.a[15:8];
        hdr.o.mid = hdr.o.a[11:4];
        hdr.o.one = (bit<8>) hdr.o.a[0:0];
        hdr.o.whole = hdr.o.a[15:0];
        hdr.o.nest = (bit<8>) hdr.o.a[11:4][5:2];
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
