// A serializable enum: members are their values, casts to and from the underlying type, unknown values kept by the cast, used as a table key.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
enum bit<8> op_t { ADD = 1, SUB = 2, NOP = 0x10 }
struct headers_t { h_t h; }
struct meta_t { op_t op; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action run(bit<8> d) { hdr.h.r = hdr.h.b + d; }
    table ops {
        key = { meta.op: exact; }
        actions = { run; NoAction; }
        const entries = { op_t.ADD: run(1); op_t.SUB: run(0xFF); }
        default_action = NoAction();
    }
    apply {
        meta.op = (op_t) hdr.h.a;
        ops.apply();
        hdr.h.s = (bit<8>) meta.op + (bit<8>) op_t.NOP;
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
