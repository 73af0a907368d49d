// standard_metadata.packet_length in egress after ingress added a header: BMv2 gives the length of the packet as ingress left it (the frame in plus the 3-byte header ingress made valid), not the length received. Found by the random differential test (hina.testing.p4smith, seed 3149); the other ways a header's validity changes, and the copies of a packet, are in programs/packet_length_*.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<16> len_in; bit<16> len_eg; }
header x_t { bit<16> v; bit<8> w; }
struct headers_t { h_t h; x_t x; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        hdr.h.len_in = (bit<16>) std.packet_length;
        if (hdr.h.a == 1) {
            hdr.x.setValid();
            hdr.x.v = 0x7777;
            hdr.x.w = 0x77;
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { hdr.h.len_eg = (bit<16>) std.packet_length; }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
