// select on a metadata field and on an expression (a slice and a sum) computed in the parser.
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> b; }
struct headers_t { k_t k; }
struct meta_t { bit<8> m; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.k);
        meta.m = hdr.k.a + hdr.k.b;
        transition select(meta.m, hdr.k.a[7:4]) {
            (10, _): ten;
            (_, 0xF): high;
            default: accept;
        }
    }
    state ten { hdr.k.b = 0x10; transition accept; }
    state high { hdr.k.b = 0xF0; transition accept; }
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
