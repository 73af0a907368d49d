// error: 25: the first entry must have a priority
// The first of a table's `entries` without a priority where a later one has one.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> k; bit<8> o; }
struct headers_t { h_t h; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action set_out(bit<8> v) { hdr.h.o = v; }
    table t {
        key = { hdr.h.k: ternary; }
        actions = { set_out; NoAction; }
        entries = {
            8w1 &&& 8w0xFF : set_out(1);
            priority = 1: 8w2 &&& 8w0xFF : set_out(2);
        }
        default_action = NoAction();
    }
    apply { t.apply(); }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
