// error: 25: static_assert
// A static_assert whose condition is known only when a packet arrives.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> k; bit<8> o; bit<16> w; }
struct headers_t { h_t h; }
struct meta_t { }

const bool H_IS_4_BYTES = static_assert(h_t.minSizeInBytes() == 4, "h_t is 4 bytes");

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action checked() { static_assert(true); }
    apply {
        std.egress_spec = 1;
        static_assert(hdr.h.k == 1);
        checked();
        if (static_assert(h_t.minSizeInBits() == 32) && hdr.h.k == 1) {
            hdr.h.o = 0x11;
        }
    }
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
