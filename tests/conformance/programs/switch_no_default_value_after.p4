// switch on a value without default, a field set before it and read after it: a value no
// label lists runs no case, so the field keeps what it had before the switch (spec, "switch
// statement": "If no case matches, and there is no default label, no statement is executed").
// Found by bench/p4_differential.py, seed 90160.
// xfail-bmv2: p4c-bm2-ss 1.2.5.16 folds the field's value after the switch as if a case always ran: its flow analysis (LocalCopyPropagation) merges the cases' flows but not the flow that runs none (an empty case or an empty default adds it back); the midend writes r = 1 as a constant, so every packet leaves with r = 1
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> r; bit<8> s; }
struct headers_t { h_t h; }
struct meta_t { bit<8> m; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        meta.m = 8w5;
        switch (hdr.h.a) {
            8w0: { meta.m = 8w1; }
        }
        hdr.h.r = meta.m;
        // the same with an empty default: p4c-bm2-ss gets this one right
        bit<8> n = 8w7;
        switch (hdr.h.a) {
            8w0: { n = 8w3; }
            default: { }
        }
        hdr.h.s = n;
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
