// A parser local variable counts the iterations of a loop over a header stack; the count goes to metadata.
#include <core.p4>
#include <v1model.p4>

header e_t { bit<7> v; bit<1> last; }
header out_t { bit<8> n; }
struct headers_t { out_t o; e_t[4] s; }
struct meta_t { bit<8> n; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    bit<8> n = 0;
    state start { pkt.extract(hdr.o); transition loop; }
    state loop {
        pkt.extract(hdr.s.next);
        n = n + 1;
        transition select(hdr.s.last.last) { 1: done; default: loop; }
    }
    state done { meta.n = n; transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.o.n = meta.n; std.egress_spec = 1;
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
