// The smallest TNA program whose parser verifies a UDP checksum as p4/tna does
// (tna_parser.p4): the pseudo-header written {src, dst, 8w0, protocol}, a constant in the list
// (tests/tofino/test_udp_checksum.py). bf-p4c leaves the constant out of the checksum unit's
// byte mask and sums the protocol byte by its place in the IPv4 header (an odd byte: the low
// byte of its 16-bit word, as the pseudo-header has it); the TTL byte beside it stays out.
#include <core.p4>
#include <tna.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header ipv4_t { bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len;
                bit<16> identification; bit<3> flags; bit<13> frag_offset; bit<8> ttl;
                bit<8> protocol; bit<16> hdr_checksum; bit<32> src_addr; bit<32> dst_addr; }
header udp_t { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }
header words_t { bit<32> w0; bit<32> w1; bit<32> w2; bit<32> w3; }
struct hdr_t { eth_t eth; ipv4_t ipv4; udp_t udp; words_t words; }
struct meta_t { bool udp_err; }
parser IP(packet_in pkt, out hdr_t hdr, out meta_t meta, out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() udp_checksum;
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.udp_err = false;
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        udp_checksum.add({hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol});
        transition select(hdr.ipv4.protocol) { 17: parse_udp; default: accept; }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        udp_checksum.add(hdr.udp);
        udp_checksum.add({hdr.udp.length});
        transition parse_words;
    }
    state parse_words {
        pkt.extract(hdr.words);
        udp_checksum.add(hdr.words);
        meta.udp_err = udp_checksum.verify() || meta.udp_err;
        transition accept;
    }
}
control I(inout hdr_t hdr, inout meta_t meta, in ingress_intrinsic_metadata_t ig_intr_md,
          in ingress_intrinsic_metadata_from_parser_t p, inout ingress_intrinsic_metadata_for_deparser_t d,
          inout ingress_intrinsic_metadata_for_tm_t tm) {
    apply { tm.ucast_egress_port = 1; if (meta.udp_err) { d.drop_ctl = 1; } }
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
