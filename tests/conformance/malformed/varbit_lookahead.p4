// error: 12: type argument must be a fixed-width type
// lookahead of a header with a varbit field (p4c: "vh_t: type argument must be a fixed-width type"; so is lookahead<varbit<64>>).
#include <core.p4>
#include <v1model.p4>
header base_t { bit<8> len; }
header opts_t { varbit<64> opts; }
header vh_t { bit<8> k; varbit<32> v; }
struct headers_t { base_t base; opts_t opts; }
struct meta_t { bit<8> x; }
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start {
        vh_t v = pkt.lookahead<vh_t>();
        meta.x = v.k;
        pkt.extract(hdr.base);
        transition accept;
    }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { std.egress_spec = 1; } }
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
