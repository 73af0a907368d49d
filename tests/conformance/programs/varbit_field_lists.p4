// varbit fields in field lists: hash (crc16, csum16), verify_checksum and update_checksum over fixed fields and a varbit field of 0, 16 or 32 bits (the bits the packet had), and over a whole header with a varbit field.
#include <core.p4>
#include <v1model.p4>

header base_t { bit<8> len; bit<8> flags; bit<16> csum; bit<16> h1; bit<16> h2; }
header opts_t { varbit<64> opts; }
header vh_t { bit<8> k; varbit<32> v; }
header tail_t { bit<8> t; }
struct headers_t { base_t base; opts_t opts; vh_t vh; tail_t tail; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.base);
        pkt.extract(hdr.opts, (bit<32>) hdr.base.len);
        pkt.extract(hdr.vh, 16);
        pkt.extract(hdr.tail);
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.base.flags == 1, { hdr.base.len, hdr.opts.opts, hdr.tail.t },
                        hdr.base.csum, HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        if (std.checksum_error == 1) { hdr.tail.t = 0xEE; }
        hash(hdr.base.h1, HashAlgorithm.crc16, 16w0, { hdr.base.len, hdr.opts.opts, hdr.tail.t }, 17w65536);
        hash(hdr.base.h2, HashAlgorithm.csum16, 16w0, { hdr.vh, hdr.opts.opts }, 17w65536);
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.base.flags == 2, { hdr.base.len, hdr.opts.opts, hdr.tail.t },
                        hdr.base.csum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
