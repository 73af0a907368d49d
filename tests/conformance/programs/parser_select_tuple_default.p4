// select on a tuple of two fields with _ in one position, and the order of cases (first match wins).
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> b; }
header out_t { bit<8> st; }
struct headers_t { k_t k; out_t o; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.k);
        pkt.extract(hdr.o);
        transition select(hdr.k.a, hdr.k.b) {
            (1, 1): s11;
            (1, _): s1x;
            (_, 2): sx2;
            default: accept;
        }
    }
    state s11 { hdr.o.st = 0x11; transition accept; }
    state s1x { hdr.o.st = 0x10; transition accept; }
    state sx2 { hdr.o.st = 0x02; transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
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
