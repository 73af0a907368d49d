// error: 14: 'lastIndex' for stacks can only be used in a parser
// `lastIndex` of a header stack read in a control.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> k; bit<32> a; bit<32> b; }
header s_t { bit<8> v; }
struct headers_t { h_t h; s_t[3] s; }
struct meta_t { bit<32> ni; bit<32> li; }
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); pkt.extract(hdr.s.next); meta.li = hdr.s.lastIndex; transition accept; }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { std.egress_spec = 1; hdr.h.a = hdr.s.lastIndex; hdr.h.b = meta.li; }
}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.s); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
