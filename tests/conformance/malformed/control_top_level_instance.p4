// error: 35: cannot instantiate at top-level
// A control instantiated at top level (p4c: only in a parser, a control or a package argument).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; }
struct headers_t { h_t h; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply {  } }

control Scale(inout bit<8> x)(bit<8> mul, bit<8> add = 1) {
    apply { x = x * mul + add; }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    Scale(add = 5, mul = 2) s1;
    Scale(3) s2;
    apply {
        std.egress_spec = 1;
        s1.apply(hdr.h.a);
        s2.apply(hdr.h.b);
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }

MyIngress() ing;
V1Switch<headers_t, meta_t>(vr = MyVerify(), p = MyParser(), ig = MyIngress(), dep = MyDeparser(),
                            eg = MyEgress(), ck = MyCompute()) main;
