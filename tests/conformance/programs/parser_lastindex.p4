// lastIndex of a header stack in the parser (the index of the last element extracted).
#include <core.p4>
#include <v1model.p4>

header e_t { bit<8> v; }
header out_t { bit<8> n; }
struct headers_t { out_t o; e_t[4] s; }
struct meta_t { bit<32> idx; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.o); transition loop; }
    state loop {
        pkt.extract(hdr.s.next);
        transition select(hdr.s.last.v) { 0: done; default: loop; }
    }
    state done { meta.idx = hdr.s.lastIndex; transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.o.n = (bit<8>) meta.idx; std.egress_spec = 1;
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
