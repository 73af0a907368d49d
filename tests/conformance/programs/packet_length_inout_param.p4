// standard_metadata.packet_length after setValid on a header bound to an inout parameter of an action that then writes every field. p4c drops the copy-in as dead (every field and the validity are written before any read), so BMv2's add_header runs on p4c's temporary, invalid at that point, and counts the header's size even when the argument was valid: the packet does not grow, packet_length does (+2).
// xfail-embedded: the embedded target copies the valid argument in, its setValid changes nothing (packet_length unchanged); following BMv2 would mean following p4c's dead-copy elimination
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<16> len_in; bit<16> len_eg; }
header p_t { bit<16> v; }
struct headers_t { h_t h; p_t p; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.op[7:7]) { 1: parse_p; default: accept; }
    }
    state parse_p { pkt.extract(hdr.p); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action make_inout(inout p_t q) {
        q.setValid();
        q.v = 0x0202;
    }
    action drop_inout(inout p_t q) {
        q.setInvalid();
    }
    apply {
        std.egress_spec = 1;
        hdr.h.len_in = (bit<16>) std.packet_length;
        bit<7> op = hdr.h.op[6:0];
        if (op == 1) {
            make_inout(hdr.p);
        } else if (op == 2) {
            drop_inout(hdr.p);
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { hdr.h.len_eg = (bit<16>) std.packet_length; }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
