// standard_metadata.packet_length in egress after ingress removed or added a header with a varbit field. BMv2 takes off the header's size with its varbit field's length as extracted; setValid() adds the fixed fields' size plus the varbit field's length, which it keeps (the value zeroed, as every field) from the header's last extract in the same packet, 0 if it had none (P4_16 leaves a header's fields unspecified after setValid()). A list expression assigned to an invalid header: p4c's add_header runs before the fields are assigned, so only the size with the varbit's length then (0 here) is added.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<16> len_in; bit<16> len_eg; }
header v_t { bit<8> n; varbit<32> data; }
struct headers_t { h_t h; v_t v; v_t w; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.op[7:7]) { 1: parse_v; default: accept; }
    }
    state parse_v {
        pkt.extract(hdr.v, (bit<32>) pkt.lookahead<bit<8>>() * 8);
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        hdr.h.len_in = (bit<16>) std.packet_length;
        bit<7> op = hdr.h.op[6:0];
        if (op == 1) {                  // the parsed header removed: -(1 + n)
            hdr.v.setInvalid();
        } else if (op == 2) {           // an invalid one made valid: +1 (its varbit field empty)
            hdr.w.setValid();
            hdr.w.n = 0x77;
        } else if (op == 3) {           // the parsed header removed, made valid again: its varbit length kept
            hdr.v.setInvalid();
            hdr.v.setValid();
        } else if (op == 4) {           // made valid, not parsed in this packet
            hdr.v.setValid();
        } else if (op == 5) {           // a list expression assigned to an invalid one: +1 (p4c's add_header before the fields)
            hdr.w = { hdr.v.n, hdr.v.data };
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
