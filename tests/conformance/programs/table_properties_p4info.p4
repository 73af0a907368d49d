// Table and action properties that only the control plane sees, named in P4Info as p4c writes
// them: @tableonly and @defaultonly action scopes, idle_timeout (NOTIFY_CONTROL), a table
// `size`, `largest_priority_wins = false` and `priority_delta` on ternary tables with `entries`
// (p4c's EntryPriorities pass gives an entry without a priority the previous one's -/+ delta).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> k; bit<8> o; }
struct headers_t { h_t h; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action set_out(bit<8> v) { hdr.h.o = v; }
    action miss() { hdr.h.o = 0xEE; }
    table aged {
        key = { hdr.h.k: exact; }
        actions = { @tableonly set_out; @defaultonly miss; }
        default_action = miss();
        idle_timeout = true;
        size = 64;
    }
    table smallest_wins {
        key = { hdr.h.k: ternary; }
        actions = { set_out; NoAction; }
        entries = {
            priority = 10: 8w0x10 &&& 8w0xF0 : set_out(1);
            priority = 5: 8w0x11 &&& 8w0xFF : set_out(2);
        }
        largest_priority_wins = false;
        priority_delta = 10;
        default_action = NoAction();
    }
    // an entry without a priority takes the previous one's minus priority_delta (16 here)
    table partial {
        key = { hdr.h.k: ternary; }
        actions = { set_out; NoAction; }
        entries = {
            priority = 20: 8w0x30 &&& 8w0xFF : set_out(1);
            8w0x30 &&& 8w0xF0 : set_out(2);
            priority = 10: 8w0x31 &&& 8w0xFF : set_out(3);
        }
        priority_delta = 4;
        default_action = NoAction();
    }
    apply {
        std.egress_spec = 1;
        if (hdr.h.k < 0x10) {
            aged.apply();
        } else if (hdr.h.k < 0x30) {
            smallest_wins.apply();
        } else {
            partial.apply();
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
    apply { pkt.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
