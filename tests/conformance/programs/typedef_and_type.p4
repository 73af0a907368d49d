// typedef (an alias) and type (a new type needing casts) over bit<8>, as locals, parameters and action arguments.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> r; bit<8> s; }
typedef bit<8> byte_t;
type bit<8> id_t;
byte_t twice(in byte_t x) { return x + x; }
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
    action set(id_t i) { hdr.h.r = (bit<8>) i; }
    apply {
        byte_t b = hdr.h.a;
        id_t i = (id_t) hdr.h.b;
        set(i);
        hdr.h.s = twice(b);
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
