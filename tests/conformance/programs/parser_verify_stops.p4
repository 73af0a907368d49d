// verify(false, e) ends the parser with error e: headers after it are not extracted (their bytes stay payload); a true verify goes on.
#include <core.p4>
#include <v1model.p4>

error { TagZero }
header a_t { bit<8> tag; }
header b_t { bit<8> v; }
struct headers_t { a_t a; b_t b; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.a);
        verify(hdr.a.tag != 0, error.TagZero);
        pkt.extract(hdr.b);
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (std.parser_error == error.TagZero) { std.egress_spec = 2; }
        else { std.egress_spec = 1; }
        if (hdr.b.isValid()) { hdr.b.v = hdr.b.v + 1; }
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
