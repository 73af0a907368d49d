/* p4info_view.p4: what p4c's P4Info lists of a program, and in which order.
 *
 * Each construct below changes what p4c's front and mid end leave for P4Info generation
 * (softswitch/frontend/controlplane.py): actions only called directly from an apply block (listed
 * without parameters), top-level actions (copied into each control block that uses them, in
 * front, in the order of first use), control instances (inlined where they are declared; never
 * applied: removed with their tables and registers), tables never applied and actions never used
 * (removed), code under a constant condition (removed), @hidden objects (ids, no entry) and
 * @brief/@description (documentation). test_p4info_parity.py compares the softswitch's P4Info of
 * this program with real p4c's; test_p4info.py checks the same facts without p4c.
 */
#include <core.p4>
#include <v1model.p4>

const bool TRACE = false;

header eth_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}

struct headers_t {
    eth_t eth;
}

struct meta_t {
    bit<8>  mark;
    bit<8>  class;
    bit<16> seen;
}

// Top-level actions (they reach no header or metadata: no parameters to bind).
action set_mark(bit<8> v) { }           // only called directly: listed without `v`
action count_up(bit<8> step) { }        // called directly in the ingress, listed by an egress
                                        // table: the ingress's copy (no `step`) is listed
action never_used() { }                 // removed
@name(".tag") action tag_frame() { }    // a table's in the ingress, called in the egress

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout meta_t m) {
    apply { }
}

// A stage the ingress declares twice, and applies once.
control Classify(inout headers_t hdr, inout meta_t m) {
    register<bit<16>>(16) class_hits;

    action by_type(bit<8> c) { m.class = c; }
    action bump() {
        bit<16> n;
        class_hits.read(n, (bit<32>)m.class);
        class_hits.write((bit<32>)m.class, n + 1);
    }

    table class_t {
        key = { hdr.eth.type : exact; }
        actions = { by_type; NoAction; }
    }

    apply {
        class_t.apply();
        bump();
        set_mark(3);
    }
}

// Applied twice: its action is listed once.
control Stamp(inout meta_t m) {
    action stamp() { m.seen = m.seen | 16w0x100; }
    apply { stamp(); }
}

control MyIngress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    @brief("Frames seen, by class.")
    register<bit<32>>(256) class_seen;
    counter(4, CounterType.packets) unused_counter;               // unused: still listed
    direct_counter(CounterType.packets) never_counted;            // its table is removed

    action drop() { mark_to_drop(sm); }

    @brief("Forward to a port.")
    @description("The port comes from the control plane.")
    action forward(@brief("Egress port.") bit<9> port) { sm.egress_spec = port; }

    action direct_only(bit<8> v) { m.mark = v; }                  // listed without `v`
    action both_ways(bit<8> v) { m.mark = v + 1; }                // listed with `v`
    action helper() { m.seen = 7; }                               // only called by an action
    action calls_helper() { helper(); }
    action only_traced() { m.seen = 9; }                          // under `if (TRACE)`
    action unused_local() { }
    @hidden action hidden_step() { m.seen = 1; }
    @name("renamed") action old_name() { m.mark = 2; }

    Classify() classify;
    Classify() spare;                                             // never applied
    Stamp() stamp;

    @brief("Where frames go.")
    table fwd_t {
        key = { hdr.eth.dst : exact @brief("Destination MAC."); }
        actions = { forward; drop; both_ways; hidden_step; }
        default_action = drop();
    }

    table unapplied_t {
        key = { hdr.eth.src : exact; }
        actions = { unused_local; }
        counters = never_counted;
    }

    table traced_t {
        key = { hdr.eth.src : exact; }
        actions = { only_traced; }
    }

    table acl_t {
        key = { hdr.eth.type : ternary; }
        actions = { drop; NoAction; tag_frame; }
        default_action = NoAction();
    }

    @hidden table hidden_t {
        key = { m.mark : exact; }
        actions = { hidden_step; }
    }

    apply {
        classify.apply(hdr, m);
        direct_only(1);
        both_ways(2);
        if (TRACE) {
            traced_t.apply();
        }
        if (!TRACE) {
            calls_helper();
        } else {
            only_traced();
        }
        switch (fwd_t.apply().action_run) {
            drop: { old_name(); }
            default: { }
        }
        if (acl_t.apply().hit) {
            count_up(1);
        }
        stamp.apply(m);
        hidden_t.apply();
        stamp.apply(m);
        class_seen.write((bit<32>)m.class, 1);
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action rewrite(bit<48> src) { hdr.eth.src = src; }

    table rewrite_t {
        key = { sm.egress_port : exact; }
        actions = { rewrite; count_up; }
    }

    apply {
        tag_frame();
        rewrite_t.apply();
    }
}

control NoCompute(inout headers_t hdr, inout meta_t m) {
    apply { }
}

control Deparse(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); }
}

V1Switch(P(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), Deparse()) main;
