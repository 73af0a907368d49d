// standard_metadata.packet_length in egress after each way ingress can change a header's validity. BMv2 keeps the packet's length in a register that only the add_header and remove_header primitives change (p4c emits them for setValid and setInvalid, and add_header for a list or struct expression assigned to a header), and only when validity changes: a header assigned whole (h1 = h2, h = {#}) or ingress writing packet_length changes nothing in egress.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<16> len_in; bit<16> len_eg; }
header p_t { bit<16> v; }
header x_t { bit<16> v; bit<8> w; }
struct headers_t { h_t h; p_t p; p_t p2; x_t x; }
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
    apply {
        std.egress_spec = 1;
        hdr.h.len_in = (bit<16>) std.packet_length;
        bit<7> op = hdr.h.op[6:0];
        if (op == 1) {                  // an invalid header made valid: +3
            hdr.x.setValid();
            hdr.x.v = 0x7777;
        } else if (op == 2) {           // setValid on the parsed (valid) header: no change
            hdr.p.setValid();
        } else if (op == 3) {           // the parsed header removed: -2
            hdr.p.setInvalid();
        } else if (op == 4) {           // setInvalid on an invalid header: no change
            hdr.x.setInvalid();
        } else if (op == 5) {           // made valid twice: +3 once
            hdr.x.setValid();
            hdr.x.setValid();
        } else if (op == 6) {           // made valid, then invalid: no change
            hdr.x.setValid();
            hdr.x.setInvalid();
        } else if (op == 7) {           // a list expression assigned: +3 (p4c: add_header)
            hdr.x = { 0x1234, 0x56 };
        } else if (op == 8) {           // a struct expression assigned: +3
            hdr.x = { v = 0x1234, w = 0x56 };
        } else if (op == 9) {           // a local made valid, then assigned: +3 (the local's setValid)
            x_t t;
            t.setValid();
            t.v = 0xABCD;
            hdr.x = t;
        } else if (op == 10) {          // a valid header assigned to an invalid one: no change
            hdr.p2 = hdr.p;
        } else if (op == 11) {          // an invalid header assigned to the valid one: no change
            hdr.p = hdr.p2;
        } else if (op == 12) {          // the invalid header expression assigned: no change
            hdr.p = (p_t){#};
        } else if (op == 14) {          // a local initialised by a list expression: +3 (add_header on it)
            x_t t = { 0x4321, 0x65 };
            hdr.x = t;
        } else if (op == 15) {          // a cast list expression assigned: +3
            hdr.x = (x_t){ 0x2468, 0x9A };
        } else if (op == 13) {          // ingress writes packet_length: egress does not see it
            std.packet_length = 1000;
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
