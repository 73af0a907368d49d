// A selector key in a table without an implementation: p4c-bm2-ss accepts it and drops it (BMv2's JSON and P4Info have the exact key only), so the table matches on the exact key whatever the selector field holds.
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> res; }
struct headers_t { k_t k; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action set_out(bit<8> v, bit<9> port) { hdr.k.res = v; std.egress_spec = port; }
    action mark(bit<8> v) { hdr.k.res = v; }
    table t {
        key = { hdr.k.a: exact; hdr.k.res: selector; }
        actions = { set_out; mark; }
    }
    apply {
        std.egress_spec = 1;
        t.apply();
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
