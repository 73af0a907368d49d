// standard_metadata.packet_length in egress after ingress changed a header stack or a header union. BMv2 counts setValid and setInvalid of a stack element (a constant or a run-time index) and of a union member, but not push_front and pop_front (they move headers, valid or not), nor the member of a union that setValid of another member makes invalid.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<8> idx; bit<16> len_in; bit<16> len_eg; }
header p_t { bit<16> v; }
header a_t { bit<8> v; }
header b_t { bit<32> v; }
header_union u_t { a_t a; b_t b; }
struct headers_t { h_t h; p_t[3] s; u_t u; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.op[7:6]) { 0: maybe_b; 1: one; 2: two; default: three; }
    }
    state three { pkt.extract(hdr.s.next); transition two; }
    state two { pkt.extract(hdr.s.next); transition one; }
    state one { pkt.extract(hdr.s.next); transition maybe_b; }
    state maybe_b {
        transition select(hdr.h.op[5:5]) { 1: parse_b; default: accept; }
    }
    state parse_b { pkt.extract(hdr.u.b); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        hdr.h.len_in = (bit<16>) std.packet_length;
        bit<4> op = hdr.h.op[3:0];
        if (op == 1) {                  // push_front: no change
            hdr.s.push_front(1);
        } else if (op == 2) {           // pop_front: no change
            hdr.s.pop_front(1);
        } else if (op == 3) {           // an invalid element made valid: +2
            hdr.s[1].setValid();
            hdr.s[1].v = 0x5151;
        } else if (op == 4) {           // a valid element made invalid: -2
            hdr.s[0].setInvalid();
        } else if (op == 5) {           // an element by a run-time index made valid: +2
            hdr.s[hdr.h.idx].setValid();
        } else if (op == 6) {           // member a made valid while b is: +1 (b's 4 bytes not taken off)
            hdr.u.a.setValid();
            hdr.u.a.v = 0xAA;
        } else if (op == 7) {           // the valid member made invalid: -4
            hdr.u.b.setInvalid();
        } else if (op == 8) {           // a local union's member made valid, the union assigned: +4
            u_t t;
            t.b.setValid();
            t.b.v = 0xB0B1B2B3;
            hdr.u = t;
        } else if (op == 9) {           // a list expression assigned to an invalid element: +2
            hdr.s[1] = { 0x5252 };
        } else if (op == 10) {          // ... to an element by a run-time index: +2
            hdr.s[hdr.h.idx] = { 0x5353 };
        } else if (op == 11) {          // ... to member a while b is valid: +1
            hdr.u.a = { 0xA1 };
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
