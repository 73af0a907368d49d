// A non-serializable enum: assignment, comparison, and switch on an enum value.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
enum color_t { RED, GREEN, BLUE }
struct headers_t { h_t h; }
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
        color_t c = color_t.RED;
        if (hdr.h.a == 1) { c = color_t.GREEN; } else if (hdr.h.a == 2) { c = color_t.BLUE; }
        hdr.h.r = c == color_t.RED ? 8w0x10 : 8w0x20;
        switch (c) {
            color_t.GREEN: { hdr.h.s = 1; }
            color_t.BLUE: { hdr.h.s = 2; }
            default: { hdr.h.s = 3; }
        }
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
