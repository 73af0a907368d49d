// digest() carries its data's values at the call: p4c copies them into temporaries there (one
// BMv2 learn list per call), so fields changed later in ingress do not change the digest; a
// struct variable passed whole is copied too. Fields of odd widths (bit<1>, bit<3>, bit<9>).
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header tag_t { bit<8> op; bit<8> val; }
struct headers_t { eth_t eth; tag_t tag; }
struct learn_t { bit<48> src; bit<9> port; }
struct small_t { bit<1> flag; bit<3> three; bit<8> val; }
struct meta_t { learn_t l; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.tag); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 2;
        if (hdr.tag.op == 1) {
            // a list expression, then its fields change
            digest<learn_t>(1, {hdr.eth.src, std.ingress_port});
            hdr.eth.src = 0;
            std.ingress_port = 7;
        } else if (hdr.tag.op == 2) {
            // a struct variable, then it changes
            meta.l.src = hdr.eth.src;
            meta.l.port = std.ingress_port;
            digest<learn_t>(1, meta.l);
            meta.l.src = 1;
        } else if (hdr.tag.op == 3) {
            // a struct expression with odd widths; the value changes after the call
            digest<small_t>(1, {hdr.tag.val[0:0], hdr.tag.val[7:5], hdr.tag.val});
            hdr.tag.val = hdr.tag.val + 1;
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
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.tag); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
