// One digest per pass through ingress, as BMv2 learns: of two digest() calls in a pass the last
// one is sent (its type and data); a digest from an action a table runs; a dropped packet's
// digest is still sent; a resubmitted packet learns in each pass.
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header tag_t { bit<8> op; bit<8> val; }
struct headers_t { eth_t eth; tag_t tag; }
struct learn_t { bit<48> src; bit<9> port; }
struct other_t { bit<8> op; bit<8> val; }
struct meta_t { @field_list(1) bit<8> pass; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.tag); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action learn_source() { digest<learn_t>(1, {hdr.eth.src, std.ingress_port}); }
    action forward(bit<9> port) { std.egress_spec = port; }
    table by_op {
        key = { hdr.tag.op: exact; }
        actions = { learn_source; forward; }
        default_action = forward(2);
    }
    apply {
        by_op.apply();
        if (hdr.tag.op == 1) {
            digest<learn_t>(1, {hdr.eth.src, std.ingress_port});
            digest<other_t>(1, {hdr.tag.op, hdr.tag.val});          // this one is sent
        } else if (hdr.tag.op == 2) {
            digest<other_t>(1, {hdr.tag.op, hdr.tag.val});
            digest<other_t>(1, {hdr.tag.op, hdr.tag.val + 1});      // this one is sent
        } else if (hdr.tag.op == 3) {
            digest<other_t>(1, {hdr.tag.op, hdr.tag.val});
            mark_to_drop(std);
        } else if (hdr.tag.op == 4) {
            std.egress_spec = 2;
            digest<other_t>(1, {hdr.tag.op, hdr.tag.val + meta.pass});
            if (meta.pass == 0) {
                meta.pass = 1;
                resubmit_preserving_field_list(1);
            }
        } else if (hdr.tag.op == 5) {
            std.egress_spec = 2;     // the table's learn_source ran: its digest is sent
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
