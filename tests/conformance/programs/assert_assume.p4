// assert and assume whose conditions hold have no effect on the packet (the condition is still
// evaluated: it reads a field set by a table's action). A failing check is not compared: BMv2
// aborts the switch process (std::abort in its assert/assume primitives), the embedded target
// logs "assert failed" and goes on (docs/p4-conformance.md).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
struct headers_t { h_t h; }
struct meta_t { bit<8> seen; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action mark(bit<8> v) { meta.seen = v; }
    table t {
        key = { hdr.h.a : exact; }
        actions = { mark; NoAction; }
        default_action = mark(1);
    }
    apply {
        assume(hdr.h.isValid());
        t.apply();
        assert(meta.seen != 0);
        hdr.h.r = meta.seen;
        std.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { assert(std.egress_port == 1); }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
