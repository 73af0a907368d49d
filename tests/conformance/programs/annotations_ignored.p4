// Annotations the targets do not act on (@hidden on an action called directly, an unknown annotation on a table, @defaultonly, @atomic on a block) change nothing.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
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
    action set(bit<8> v) { hdr.h.r = v; }
    @hidden action mark() { hdr.h.s = 0x11; }
    @my_annotation("x", 1) table t {
        key = { hdr.h.a: exact; }
        actions = { set; @defaultonly NoAction; }
        default_action = NoAction();
    }
    apply {
        @atomic { t.apply(); }
        mark();
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
