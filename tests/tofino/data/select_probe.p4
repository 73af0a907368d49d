// The smallest TNA program whose parser must branch: a select on the ingress port, then one on a
// header field (tests/tofino/test_parser_check.py). Compiled right, the ingress parser of the
// .bfa matches on them (a "match:" line and one row per case); compiled by a bf-p4c with p4c
// issue #5752, every select keeps only its first case.
#include <core.p4>
#include <tna.p4>
header a_t { bit<8> x; bit<8> y; }
header b_t { bit<16> z; }
struct hdr_t { a_t a; b_t b; }
struct meta_t { }

parser IP(packet_in pkt, out hdr_t hdr, out meta_t meta, out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        transition select(ig_intr_md.ingress_port) {
            68: parse_a;
            default: parse_b;
        }
    }
    state parse_a { pkt.extract(hdr.a); transition select(hdr.a.x) { 1: parse_b; default: accept; } }
    state parse_b { pkt.extract(hdr.b); transition accept; }
}
control I(inout hdr_t hdr, inout meta_t meta, in ingress_intrinsic_metadata_t ig_intr_md,
          in ingress_intrinsic_metadata_from_parser_t p, inout ingress_intrinsic_metadata_for_deparser_t d,
          inout ingress_intrinsic_metadata_for_tm_t tm) {
    apply { tm.ucast_egress_port = 1; if (hdr.b.isValid()) { hdr.b.z = hdr.b.z + 1; } }
}
control ID(packet_out pkt, inout hdr_t hdr, in meta_t meta, in ingress_intrinsic_metadata_for_deparser_t d) {
    apply { pkt.emit(hdr); }
}
parser EP(packet_in pkt, out hdr_t hdr, out meta_t meta, out egress_intrinsic_metadata_t eg) {
    state start { pkt.extract(eg); transition accept; }
}
control E(inout hdr_t hdr, inout meta_t meta, in egress_intrinsic_metadata_t eg, in egress_intrinsic_metadata_from_parser_t p,
          inout egress_intrinsic_metadata_for_deparser_t d, inout egress_intrinsic_metadata_for_output_port_t o) { apply {} }
control ED(packet_out pkt, inout hdr_t hdr, in meta_t meta, in egress_intrinsic_metadata_for_deparser_t d) { apply { pkt.emit(hdr); } }
Pipeline(IP(), I(), ID(), EP(), E(), ED()) pipe;
Switch(pipe) main;
