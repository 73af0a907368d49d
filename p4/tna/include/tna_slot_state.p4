// Slot state on TNA: the exactly-once logic of p4/include/slot_state.p4 as RegisterActions, one
// register per stage, each touched once per packet. What differs, and why:
//   * slot_bitmap is one Register<pair> per slot (lo: copy 0, hi: copy 1), as in SwitchML: one
//     RegisterAction sets this copy's bit and clears it in the other copy. Four RegisterActions
//     (new use / contribution, for each pool): Tofino 1's limit per register.
//   * No slot_count: a copy is complete when its bitmap equals the job's all_workers (from
//     admission), so a RESULT's count is the job's n_workers.
//   * No other-copy seq check (slot_state.p4's other_current/other_newer, the "moved on" guard
//     against a late copy of a contribution reordered behind the worker's next one): it needs
//     both copies' seqs in one RegisterAction, which does not fit a stateful ALU's two
//     comparisons together with this copy's own. See docs/dataplane.md, "Tofino (TNA)".
//   * No slot_flags: lanes saturate instead of flagging overflow (tna_lanes.p4).
#ifndef _HINA_TNA_SLOT_STATE_P4_
#define _HINA_TNA_SLOT_STATE_P4_

#include "tna_headers.p4"

struct bitmap_pair_t {
    bit<32> lo;   // pool 0
    bit<32> hi;   // pool 1
}

control TnaSlotState(inout tna_headers_t hdr, inout tna_ingress_metadata_t meta) {

    // Job generation of each slot copy's current use (0 = never used); index reg_index.
    Register<bit<16>, bit<32>>(2 * HINA_SLOT_CAPACITY) slot_generation;
    RegisterAction<bit<16>, bit<32>, bit<16>>(slot_generation) claim_copy = {
        void apply(inout bit<16> value, out bit<16> stored) {
            stored = value;
            value = meta.generation;
        }
    };

    // seq + 1 of each slot copy's current use (0 = never used); index reg_index.
    Register<bit<32>, bit<32>>(2 * HINA_SLOT_CAPACITY) slot_seq;
    // A reclaimed copy (another generation's): a new use whatever the stored seq.
    RegisterAction<bit<32>, bit<32>, bit<32>>(slot_seq) take_seq = {
        void apply(inout bit<32> value) {
            value = meta.seq1;
        }
    };
    // Serial-number order (RFC 1982): a newer seq starts a new use; returns the stored one.
    RegisterAction<bit<32>, bit<32>, bit<32>>(slot_seq) check_round = {
        void apply(inout bit<32> value, out bit<32> stored) {
            stored = value;
            if ((int<32>)(value - meta.seq1) < 0) {
                value = meta.seq1;
            }
        }
    };

    // Contributors of both copies of each slot; index slot_index.
    Register<bitmap_pair_t, bit<32>>(HINA_SLOT_CAPACITY) slot_bitmap;
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(slot_bitmap) new_use_0 = {
        void apply(inout bitmap_pair_t value) {
            value.lo = meta.worker_bit;
            value.hi = value.hi & ~meta.worker_bit;
        }
    };
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(slot_bitmap) new_use_1 = {
        void apply(inout bitmap_pair_t value) {
            value.hi = meta.worker_bit;
            value.lo = value.lo & ~meta.worker_bit;
        }
    };
    // A drained copy (bitmap 0: every worker has moved on) is left alone: the packet is stale.
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(slot_bitmap) contribute_0 = {
        void apply(inout bitmap_pair_t value, out bit<32> before) {
            before = value.lo;
            if (value.lo != 0) {
                value.lo = value.lo | meta.worker_bit;
                value.hi = value.hi & ~meta.worker_bit;
            }
        }
    };
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(slot_bitmap) contribute_1 = {
        void apply(inout bitmap_pair_t value, out bit<32> before) {
            before = value.hi;
            if (value.hi != 0) {
                value.hi = value.hi | meta.worker_bit;
                value.lo = value.lo & ~meta.worker_bit;
            }
        }
    };

    // Register indices go through the hash unit's identity (what addresses a stateful ALU):
    // the compiler does not take an index computed by an add in the stage before directly.
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) copy_index;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) slot_index;

    // One dependent step per action: Tofino runs an action in one stage, so a value computed in
    // an action (or returned by a RegisterAction) is used by the next action, not the same one.
    action widen() {
        meta.slot_index = (bit<32>)hdr.hina.slot;
    }
    action locate() {
        meta.slot_index = meta.slot_index + meta.reg_base;
        meta.seq1 = hdr.hina.seq + 1;
        meta.new_round = 0;
        meta.pool = hdr.hina.pool;
    }
    action index_copy() {
        meta.reg_index = copy_index.get({meta.slot_index, meta.pool});
    }
    action index_slot() {   // (one hash result per action: 32 bits of immediate data)
        meta.bitmap_index = slot_index.get({meta.slot_index});
    }
    action compare_seq() {
        meta.seq_diff = meta.seq1 - meta.stored_seq1;
    }
    action sign_of_diff() {
        meta.seq_older = meta.seq_diff[31:31];
    }
    action classify() {
        meta.bitmap_mine = meta.bitmap_old & meta.worker_bit;
        meta.bitmap_new = meta.bitmap_old | meta.worker_bit;
    }

    apply {
        widen();
        locate();
        index_copy();
        index_slot();
        meta.stored_generation = claim_copy.execute(meta.reg_index);
        if (meta.stored_generation != meta.generation) {
            take_seq.execute(meta.reg_index);
            meta.new_round = 1;
        } else {
            meta.stored_seq1 = check_round.execute(meta.reg_index);
            compare_seq();
            sign_of_diff();
            if (meta.seq_older == 1) {
                meta.reason = REASON_STALE_POOL;      // an older use of this copy
            } else if (meta.seq_diff != 0) {
                meta.new_round = 1;
            }
        }
        if (meta.reason == REASON_NONE) {
            if (meta.new_round == 1) {
                if (hdr.hina.pool == 0) { new_use_0.execute(meta.bitmap_index); }
                else { new_use_1.execute(meta.bitmap_index); }
                meta.bitmap_old = 0;
                meta.bitmap_new = meta.worker_bit;
                meta.lane_op = LANE_WRITE;
            } else {
                if (hdr.hina.pool == 0) { meta.bitmap_old = contribute_0.execute(meta.bitmap_index); }
                else { meta.bitmap_old = contribute_1.execute(meta.bitmap_index); }
                classify();
                if (meta.bitmap_old == 0) {
                    meta.reason = REASON_STALE_POOL;  // drained: everybody moved on
                } else if (meta.bitmap_mine == 0) {
                    if (hdr.hina.op == OP_MAX) { meta.lane_op = LANE_MAX; }
                    else if (hdr.hina.op == OP_OR) { meta.lane_op = LANE_OR; }
                    else { meta.lane_op = LANE_SUM; }
                } else if (meta.bitmap_old == meta.all_workers) {
                    meta.lane_op = LANE_READ;         // it lost the result: send it again
                    meta.reply = REPLY_UNICAST;
                } else {
                    meta.reason = REASON_DUPLICATE;   // already counted, copy still filling
                }
            }
            if (meta.reason == REASON_NONE && meta.lane_op != LANE_READ
                    && meta.bitmap_new == meta.all_workers) {
                meta.reply = REPLY_MULTICAST;         // this contribution completes the copy
            }
        }
    }
}

#endif  // _HINA_TNA_SLOT_STATE_P4_
