// standard_metadata.packet_length of each copy of a packet after a header was added or removed. BMv2 keeps the packet's length in a register that add_header and remove_header (setValid and setInvalid, in the parser too) change: egress, multicast replicas and an egress clone (E2E) take the register, an ingress clone (I2E) the length received plus what the parser adds again, a resubmitted packet the length received, a recirculated one the length of the frame egress deparsed. truncate() does not change it.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<16> len_in; bit<16> len_eg; }
header m_t { bit<8> v; }
header x_t { bit<16> v; bit<8> w; }
struct headers_t { h_t h; m_t m; x_t x; }
struct meta_t { @field_list(1) bit<8> unused; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.op[7:7]) { 1: mark; default: accept; }
    }
    state mark {                        // the parser adds a header: +1 from egress on
        hdr.m.setValid();
        hdr.m.v = 0x3C;
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.h.len_in = (bit<16>) std.packet_length;
        bit<7> op = hdr.h.op[6:0];
        std.egress_spec = 1;
        if (std.instance_type == 6 || std.instance_type == 4) {
            std.egress_spec = 2;        // a resubmitted or recirculated packet
        } else if (op == 1) {           // an ingress clone to session 7
            hdr.x.setValid();
            clone(CloneType.I2E, 7);
        } else if (op == 2) {           // multicast to group 1
            hdr.x.setValid();
            std.mcast_grp = 1;
        } else if (op == 3) {           // resubmitted after a header was added
            hdr.x.setValid();
            resubmit_preserving_field_list(1);
        } else if (op == 4) {           // truncated (16 bytes out) after a header was added
            hdr.x.setValid();
            truncate(16);
        } else if (op == 7) {           // truncated, then recirculated by egress
            truncate(16);
        } else if (op == 8) {           // a header added here, removed in egress (op 8 there)
            hdr.x.setValid();
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.h.len_eg = (bit<16>) std.packet_length;
        bit<7> op = hdr.h.op[6:0];
        if (std.egress_port == 1) {
            if (op == 5) {              // a header added, then an egress clone to session 7
                hdr.x.setValid();
                clone(CloneType.E2E, 7);
            } else if (op == 6) {       // a header added, then recirculated
                hdr.x.setValid();
                recirculate_preserving_field_list(1);
            } else if (op == 7) {
                recirculate_preserving_field_list(1);
            } else if (op == 8) {       // the header ingress added removed, then an egress clone
                hdr.x.setInvalid();
                clone(CloneType.E2E, 7);
            }
        }
    }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
