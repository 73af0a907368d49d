// &&, || and ! on bool, with a conditional expression turning the result into bits.
#include <core.p4>
#include <v1model.p4>

header ops_t { bit<8> a; bit<8> b; bit<8> and_; bit<8> or_; bit<8> not_; bit<8> mix; }
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
        hdr.o.and_ = (hdr.o.a > 5 && hdr.o.b > 5) ? 8w1 : 8w0;
        hdr.o.or_ = (hdr.o.a > 5 || hdr.o.b > 5) ? 8w1 : 8w0;
        hdr.o.not_ = !(hdr.o.a == hdr.o.b) ? 8w1 : 8w0;
        hdr.o.mix = (!(hdr.o.a > 5) || hdr.o.b == 0) && true ? 8w1 : 8w0;
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
