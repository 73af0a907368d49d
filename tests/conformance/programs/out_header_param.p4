// A header bound to an out parameter starts invalid (P4_16 6.8: an out parameter is initialised, a header invalid), whatever the argument was: an action that does not write it leaves the argument invalid; the callee's setValid makes a header valid (counted in packet_length, as BMv2's add_header on p4c's temporary is) and reading the argument inside the callee sees it as it was.
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

void make_f(out p_t q) {
    q.setValid();
    q.v = 0x0F0F;
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action make_out(out p_t q) {
        q.setValid();
        q.v = 0x0101;
    }
    action clear_out(out p_t q) {
    }
    action bump_out(out p_t q) {
        q.setValid();
        q.v = hdr.p.v + 1;              // hdr.p as it was: the argument is not q
    }
    action check_out(out p_t q, out bit<16> seen) {
        seen = q.isValid() ? 16w1 : 16w0;
        q.setValid();
        q.v = 0x0C0C;
    }
    apply {
        std.egress_spec = 1;
        hdr.h.len_in = (bit<16>) std.packet_length;
        bit<7> op = hdr.h.op[6:0];
        if (op == 1) {
            make_out(hdr.p);
        } else if (op == 2) {
            clear_out(hdr.p);
        } else if (op == 3) {
            bump_out(hdr.p);
        } else if (op == 4) {
            make_f(hdr.p);
        } else if (op == 5) {
            check_out(hdr.p, hdr.h.len_in);
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
