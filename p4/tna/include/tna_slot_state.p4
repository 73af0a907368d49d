// Slot state on TNA: the exactly-once logic of p4/include/slot_state.p4 as RegisterActions, one
// register per stage, each touched once per packet, in three stages (1-3) so that the lanes
// have the eight others. What differs, and why:
//   * Register indices come from the hash unit, which feeds a stateful ALU's address in the same
//     stage, by XOR: slot_base ^ slot, copy_base ^ (slot << 1 | pool). XOR is the sum only if the
//     controller aligns each job's base to a power of two no smaller than its n_slots (each
//     job's range [base, base + 2^k)); admit_worker carries reg_base, 2 * reg_base, 4 * reg_base.
//   * check_round returns the stateful ALU's predicate (which of its two comparisons held)
//     instead of the stored seq, so that no subtraction stage follows it.
//   * slot_bitmap is one Register<pair> per slot (lo: copy 0, hi: copy 1), as in SwitchML. Four
//     RegisterActions (new use / contribution, for each pool): Tofino 1's limit per register.
//     Unlike SwitchML's, a contribution does not clear the worker's bit in the other copy: with
//     no count register, the bitmap is what says a copy is complete, and a worker that lost a
//     result must find its copy complete after the others have moved on to the other copy
//     (cleared bits made its retransmission a DUPLICATE for ever: a deadlock). A copy's bits
//     are reset by its next use (new_use_*). So a late packet of a copy everybody has left is
//     answered with the stored result, not dropped as STALE_POOL (p4/hina.p4 drops it).
//   * No slot_count: a copy is complete when its bitmap equals the job's all_workers (from
//     admission), so a RESULT's count is the job's n_workers.
//   * No other-copy seq check (slot_state.p4's other_current/other_newer: the "moved on" guard
//     against a late copy of a contribution reordered behind the worker's next one): it needs
//     both copies' seqs in one RegisterAction, more than a stateful ALU's two comparisons.
//   * No slot_flags: lanes saturate instead of flagging overflow (tna_lanes.p4).
//   * Block-sparse (TNA_BLOCK_SPARSE=1): block_index in the stage after slot_seq (a new round
//     writes the packet's block, the same round compares it: BAD_BLOCK before the bitmap is
//     touched), so the bitmap moves one stage on. block_next: tna_block_sparse.p4.
#ifndef _HINA_TNA_SLOT_STATE_P4_
#define _HINA_TNA_SLOT_STATE_P4_

#include "tna_headers.p4"

struct bitmap_pair_t {
    bit<32> lo;   // pool 0
    bit<32> hi;   // pool 1
}

// Predicate of a stateful ALU with comparisons (lo, hi): one-hot over the four outcomes,
// bit (2 * hi + lo) (tofino1_base.p4, RegisterAction.predicate).
#define ORDER_SAME 1      // neither: the current use
#define ORDER_NEWER 2     // lo: the packet's seq is newer: a new use
#define ORDER_OLDER 4     // hi: an older use of this copy

#if TNA_BLOCK_SPARSE
// block_check: the packet's block against its round's (0: not a block-sparse packet).
#define BLOCK_MATCH 1     // predicate of block_compare: value != block is false
#define BLOCK_MISMATCH 2  // ... is true
// slot_bitmap_update's rows: whatever block_check says but a mismatch.
#define TNA_BITMAP_ROW(order, pool, act) (order, pool, 0) : act(); (order, pool, BLOCK_MATCH) : act();
#else
#define TNA_BITMAP_ROW(order, pool, act) (order, pool) : act();
#endif

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
    RegisterAction<bit<32>, bit<32>, bit<4>>(slot_seq) take_seq = {
        void apply(inout bit<32> value) {
            value = meta.seq1;
        }
    };
    // Serial-number order (RFC 1982) of seq + 1 against the stored one; a newer one is taken.
    RegisterAction<bit<32>, bit<32>, bit<4>>(slot_seq) check_round = {
        void apply(inout bit<32> value, out bit<4> order) {
            // lo: newer, hi: older (RegisterActions take no local variables).
            order = this.predicate((int<32>)(value - meta.seq1) < 0,
                                   (int<32>)(value - meta.seq1) > 0);
            if ((int<32>)(value - meta.seq1) < 0) {
                value = meta.seq1;
            }
        }
    };

#if !TNA_BLOCK_SPARSE
#define TNA_SLOT_BITMAP_PART 1
#include "tna_slot_bitmap.p4"
#undef TNA_SLOT_BITMAP_PART
#endif
#if TNA_BLOCK_SPARSE
    // Block-sparse: the block the current use (round) of each slot copy aggregates, set by the
    // round's first packet; index reg_index (p4/include/slot_state.p4's check_block).
    Register<bit<32>, bit<32>>(2 * HINA_SLOT_CAPACITY) block_index;
    RegisterAction<bit<32>, bit<32>, bit<4>>(block_index) block_first = {
        void apply(inout bit<32> value) {
            value = hdr.block.block;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<4>>(block_index) block_compare = {
        void apply(inout bit<32> value, out bit<4> check) {
            check = this.predicate(value != hdr.block.block);   // BLOCK_MATCH or BLOCK_MISMATCH
        }
    };

#endif

    Hash<bit<32>>(HashAlgorithm_t.XOR32) copy_hash;
    Hash<bit<32>>(HashAlgorithm_t.XOR32) copy_hash_again;
#if !TNA_BLOCK_SPARSE
    Hash<bit<32>>(HashAlgorithm_t.XOR32) slot_hash;
#endif
    Hash<bit<32>>(HashAlgorithm_t.XOR32) lane_hash;

    // Stage 1: claim the copy; its index, and block 0's lane index, for the stages after.
    action claim() {
        meta.in_slot = 1;
        meta.stored_generation = claim_copy.execute(
            copy_hash.get({meta.copy_base, 16w0, hdr.hina.slot, hdr.hina.pool}));
    }
    action index_copy() {
        meta.reg_index = copy_hash_again.get({meta.copy_base, 16w0, hdr.hina.slot, hdr.hina.pool});
    }
    action other_workers() {
        meta.others = meta.all_workers ^ meta.worker_bit;
    }
    action index_lanes() {
        meta.lane_index = lane_hash.get({meta.lane_base, 15w0, hdr.hina.slot, hdr.hina.pool, 1w0});
    }
    // Stage 2.
    action reclaim() {
        take_seq.execute(meta.reg_index);
        meta.seq_order = ORDER_NEWER;
    }
    action order() {
        meta.seq_order = check_round.execute(meta.reg_index);
    }

#if !TNA_BLOCK_SPARSE
#define TNA_SLOT_BITMAP_PART 2
#include "tna_slot_bitmap.p4"
#undef TNA_SLOT_BITMAP_PART
#endif
#if TNA_BLOCK_SPARSE
    // Block-sparse, stage 3 (the bitmap in stage 4): the round's block.
    action block_new_round() {
        block_first.execute(meta.reg_index);
        meta.block_check = BLOCK_MATCH;
    }
    action block_same_round() {
        meta.block_check = block_compare.execute(meta.reg_index);
    }
    table block_round {
        key = {
            meta.seq_order:      exact;
            hdr.block.isValid(): exact @name("block");
        }
        actions = {
            block_new_round;
            block_same_round;
            NoAction;
        }
        const entries = {
            (ORDER_NEWER, true) : block_new_round();
            (ORDER_SAME, true) : block_same_round();
        }
        size = 2;
        const default_action = NoAction();
    }
#endif
    apply {
        claim();
        index_copy();
        index_lanes();
        other_workers();
        if (meta.stored_generation != meta.generation) {
            reclaim();
        } else {
            order();
        }
#if TNA_BLOCK_SPARSE
        block_round.apply();            // stage 3; the bitmap (TnaSlotBitmap) in stage 4
#else
        // Stage 3.
        slot_bitmap_update.apply();
#endif
    }
}

#if TNA_BLOCK_SPARSE
// Block-sparse profile: the bitmap after block_index (stage 4), applied by hina_tna.p4 at the
// head of the AGGREGATE branch, outside the slot state's gateway block. Its table's key is its
// gate: seq_order is 0 (the parser's) for a packet that did not go through the slot state, and
// no row matches 0. The same register, RegisterActions and rows as the default's, plus an
// out-of-step block (block_check: tna_block_sparse.p4) and an explicit older use.
control TnaSlotBitmap(inout tna_headers_t hdr, inout tna_ingress_metadata_t meta) {
#define TNA_SLOT_BITMAP_PART 1
#include "tna_slot_bitmap.p4"
#undef TNA_SLOT_BITMAP_PART
    Hash<bit<32>>(HashAlgorithm_t.XOR32) slot_hash;
#define TNA_SLOT_BITMAP_PART 2
#include "tna_slot_bitmap.p4"
#undef TNA_SLOT_BITMAP_PART

    apply {
        slot_bitmap_update.apply();
    }
}
#endif

// What the slot state means for the packet (pass 0 in a slot copy), as p4/include/slot_state.p4
// decides it, once the lanes are under way (not on their path). No gateway: the comparisons are
// XORs and ANDs that one ternary table matches against 0, so that these tables are placed beside
// the lanes (a gateway block after them would wait for the last lane on Tofino 1).
control TnaSlotOutcome(inout tna_headers_t hdr, inout tna_ingress_metadata_t meta) {

    action classify() {
        meta.mine = meta.bitmap_old & meta.worker_bit;
        meta.d_others = meta.bitmap_old ^ meta.others;
        meta.d_all = meta.bitmap_old ^ meta.all_workers;
    }
    action stale_pool() {
        meta.reason = REASON_STALE_POOL;
    }
#if TNA_BLOCK_SPARSE
    action bad_block() {
        meta.reason = REASON_BAD_BLOCK;
    }
#define TNA_ANY_BLOCK , _
#else
#define TNA_ANY_BLOCK
#endif
    action duplicate() {
        meta.reason = REASON_DUPLICATE;
    }
    action complete() {
        meta.reply = REPLY_MULTICAST;
    }
    action resend() {
        meta.reply = REPLY_UNICAST;
    }
    action contribute() {}

    // Rows in order (first match wins), each group as slot_state.p4's branches.
    table slot_outcome {
        key = {
            meta.recirculated: ternary;
            meta.in_slot:      ternary;
            meta.stale:        ternary;
            meta.new_round:    ternary;
            meta.others:       ternary;
            meta.bitmap_old:   ternary;
            meta.mine:         ternary;
            meta.d_others:     ternary;
            meta.d_all:        ternary;
#if TNA_BLOCK_SPARSE
            meta.block_bad:    ternary;
#endif
        }
        actions = {
#if TNA_BLOCK_SPARSE
            bad_block;
#endif
            stale_pool;
            duplicate;
            complete;
            resend;
            contribute;
            NoAction;
        }
        const entries = {
#if TNA_BLOCK_SPARSE
            // Block-sparse: not the block of the copy's round (BAD_BLOCK).
            (0, 1, 1, _, _, _, _, _, _, 1) : bad_block();
#endif
            // An older use of this copy (STALE_POOL).
            (0, 1, 1, _, _, _, _, _, _ TNA_ANY_BLOCK) : stale_pool();
            // A new use: complete at once in a one-worker job.
            (0, 1, 0, 1, 0, _, _, _, _ TNA_ANY_BLOCK) : complete();
            (0, 1, 0, 1, _, _, _, _, _ TNA_ANY_BLOCK) : contribute();
            // No bits: a copy with no use yet (bits are no longer cleared when workers move on).
            (0, 1, 0, 0, _, 0, _, _, _ TNA_ANY_BLOCK) : stale_pool();
            // The worker's first contribution to this use: it completes the copy, or not yet.
            (0, 1, 0, 0, _, _, 0, 0, _ TNA_ANY_BLOCK) : complete();
            (0, 1, 0, 0, _, _, 0, _, _ TNA_ANY_BLOCK) : contribute();
            // Already counted: the copy is complete (it lost the result: send it again), or
            // still filling.
            (0, 1, 0, 0, _, _, _, _, 0 TNA_ANY_BLOCK) : resend();
            (0, 1, 0, 0, _, _, _, _, _ TNA_ANY_BLOCK) : duplicate();
        }
#if TNA_BLOCK_SPARSE
        size = 9;
#else
        size = 8;
#endif
        const default_action = NoAction();
    }

    apply {
        classify();
        slot_outcome.apply();
    }
}

#endif  // _HINA_TNA_SLOT_STATE_P4_
