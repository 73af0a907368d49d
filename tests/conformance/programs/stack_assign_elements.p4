// Assigning header stack elements by constant index: setValid on a middle element, copying one element into another, emit of the whole stack (valid elements only).
#include <core.p4>
#include <v1model.p4>

header e_t { bit<8> v; }
struct headers_t { e_t[3] s; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.s[0]); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.s[2] = hdr.s[0];
        hdr.s[2].v = hdr.s[2].v + 1;
        if (hdr.s[0].v == 1) { hdr.s[1].setValid(); hdr.s[1].v = 0x99; }
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
