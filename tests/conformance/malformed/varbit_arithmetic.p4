// error: 38: expects integer operands
// Arithmetic on a varbit field.
#include <core.p4>
#include <v1model.p4>

header base_t { bit<8> len; bit<8> r; }
header opts_t { varbit<128> opts; }
header mix_t { bit<8> a; varbit<16> v; }
header trail_t { bit<8> t; }
struct headers_t { base_t base; opts_t opts; opts_t copy; mix_t mix; trail_t trail; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.base);
        pkt.extract(hdr.opts, (bit<32>) hdr.base.len);
        transition select(hdr.base.len) {
            0: with_mix;
            default: trail;
        }
    }
    state with_mix {
        pkt.extract(hdr.mix, 8);
        transition trail;
    }
    state trail {
        pkt.extract(hdr.trail);
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        bit<8> r = 0;
        hdr.opts.opts = hdr.opts.opts + 1;
        if (std.parser_error == error.HeaderTooShort) { r = 1; }
        if (std.parser_error == error.ParserInvalidArgument) { r = 2; }
        if (std.parser_error == error.PacketTooShort) { r = 3; }
        if (hdr.opts.isValid()) { r = r | 0x10; }
        if (hdr.trail.isValid()) { r = r | 0x20; }
        if (hdr.opts.maxSizeInBits() == 128 && hdr.opts.minSizeInBytes() == 0
                && hdr.mix.minSizeInBits() == 8 && hdr.mix.maxSizeInBytes() == 3) { r = r | 0x40; }
        if (hdr.base.len == 16) { hdr.copy = hdr.opts; }
        if (hdr.copy.isValid() && hdr.copy.opts == hdr.opts.opts) { r = r | 0x04; }
        if (hdr.copy == hdr.opts) { r = r | 0x80; }
        hdr.base.r = r;
    }
}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply {  } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
