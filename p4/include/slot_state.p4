// Slot state: exactly-once aggregation with two pool copies per slot (SwitchML's shadow set).
//
// A job owns slots [reg_base, reg_base + n_slots). Per slot copy (reg_index = slot_index*2+pool):
// the generation and sequence number of its current use, the contributor bitmap, count and
// result flags. A contribution of a generation other than the copy's stored one starts a fresh
// use whatever the stored seq (the copy is reclaimed: bitmap, count, flags and lanes restart,
// seq is taken), so a job restarted in a new generation needs no register wipe. Only packets of
// the job's current generation get here (Admission), so there is no race with in-flight packets
// of the old one, and equality of generations is all the switch needs. A
// contribution to one copy clears the worker's bit in the other copy (reg_index ^ 1) in the same
// action. (Two 32-bit cells, not one 64-bit cell per slot: BMv2's Thrift runtime reads cells as
// signed 64-bit integers, so pool 1's worker 31 would read back saturated; on Tofino the two
// are one Register<pair>.) A worker sends into
// copy p only after it has the result of the other copy's previous use, so when every worker
// has moved to copy p, copy !p is drained and its result may be overwritten two rounds later.
// Every register array below is touched once per packet, read-modify-write inside one action.
#ifndef _HINA_SLOT_STATE_P4_
#define _HINA_SLOT_STATE_P4_

#include "headers.p4"

control SlotState(inout headers_t hdr, inout metadata_t meta) {

    // Job generation of the current use of each slot copy; 0 = never used. Written by this
    // control; the controller zeroes a job's range when it installs the job.
    register<bit<16>, reg_index_t>(2 * HINA_SLOT_CAPACITY) slot_generation;
    // seq + 1 of the current use of each slot copy; 0 = never used. Written by this control;
    // the controller zeroes a job's range when it installs the job.
    register<bit<32>, reg_index_t>(2 * HINA_SLOT_CAPACITY) slot_seq;
    // Contributor bitmap of each slot copy (bit w: worker w). Written by this control.
    register<bit<32>, reg_index_t>(2 * HINA_SLOT_CAPACITY) slot_bitmap;
    // Contributors to the current use of each slot copy. Written by this control.
    register<bit<8>, reg_index_t>(2 * HINA_SLOT_CAPACITY) slot_count;
    // Block-sparse: the block the current use (round) of each slot copy aggregates, set by the
    // round's first packet. Written by this control (block-sparse packets only).
    register<bit<32>, reg_index_t>(2 * HINA_SLOT_CAPACITY) block_index;
    // Block-sparse: the smallest `next` announced in the current round of each slot copy (every
    // worker announces once per round, contributing or skipping), i.e. the next block the slot
    // aggregates once the round is complete. Written by this control (block-sparse only).
    register<bit<32>, reg_index_t>(2 * HINA_SLOT_CAPACITY) block_next;

    // Claim the copy for the packet's generation (the job's current one); reclaim = it was
    // another generation's. Also note whether the slot's other copy is of the current
    // generation (its seq and bitmap mean something to this packet only then). Tofino: the
    // two copies' generations are one Register<pair> cell per slot; a RegisterAction writes
    // this copy's half and returns both comparisons, in the stage before slot_seq's.
    action claim_copy() {
        bit<16> stored;
        bit<16> other;
        slot_generation.read(stored, meta.reg_index);
        slot_generation.read(other, meta.reg_index ^ 1);
        meta.reclaim = (stored != meta.generation) ? 1w1 : 1w0;
        meta.other_current = (other == meta.generation) ? 1w1 : 1w0;
        slot_generation.write(meta.reg_index, meta.generation);
    }

    // Serial-number comparison (RFC 1982) of the packet's seq with the copy's current use; a
    // reclaimed copy starts a new use whatever its stored seq. Also whether the other copy's
    // current use is newer than this packet's chunk (chunk + n_slots: the slot's next use).
    // Tofino: the two copies' seqs are one Register<pair> cell per slot; a RegisterAction with
    // the reclaim bit as input updates this copy's half and returns the comparisons.
    action check_round() {
        bit<32> stored;
        bit<32> other;
        slot_seq.read(stored, meta.reg_index);
        slot_seq.read(other, meta.reg_index ^ 1);
        bit<32> seq1 = hdr.hina.seq + 1;
        bit<32> diff = seq1 - stored;
        bit<32> ahead = other - seq1;
        meta.new_round = (meta.reclaim == 1 || (diff != 0 && diff[31:31] == 0)) ? 1w1 : 1w0;
        meta.stale = (meta.reclaim == 0 && diff[31:31] == 1) ? 1w1 : 1w0;
        meta.other_newer = (meta.other_current == 1 && ahead != 0 && ahead[31:31] == 0)
                           ? 1w1 : 1w0;
        slot_seq.write(meta.reg_index, (meta.new_round == 1) ? seq1 : stored);
    }

    // Classify the packet (new contribution, retransmission, stale) and update both bitmaps.
    action update_bitmap() {
        reg_index_t other_index = meta.reg_index ^ 1;
        bit<32> cur;
        bit<32> other;
        slot_bitmap.read(cur, meta.reg_index);
        slot_bitmap.read(other, other_index);
        bool seen = (cur & meta.worker_bit) != 0;
        bool drained = cur == 0;
        bool fresh = meta.new_round == 1;
        // This worker already contributes to the slot's next use (the other copy, newer and
        // of this generation): it had this chunk's result, so this is a late copy of its
        // contribution, reordered behind the next one. Its bit here was cleared when it moved
        // on; without this check the copy would take it a second time while another worker
        // has not moved on yet, and clear the worker's bit in the next use.
        bool moved_on = meta.other_newer == 1 && (other & meta.worker_bit) != 0;
        bool add = fresh || (!seen && !drained && !moved_on);
        meta.contribute = add ? 1w1 : 1w0;
        meta.retransmit = (!fresh && seen) ? 1w1 : 1w0;
        // Same use, but every worker (or this one) has moved on to the other copy: an old
        // duplicate.
        meta.stale = (!fresh && (drained || moved_on)) ? 1w1 : 1w0;
        bit<32> cur_next = fresh ? meta.worker_bit : (add ? (cur | meta.worker_bit) : cur);
        bit<32> other_next = add ? (other & ~meta.worker_bit) : other;
        slot_bitmap.write(meta.reg_index, cur_next);
        slot_bitmap.write(other_index, other_next);
    }

    action update_count() {
        bit<8> count;
        slot_count.read(count, meta.reg_index);
        count = (meta.new_round == 1) ? 8w1 : ((meta.contribute == 1) ? count + 1 : count);
        slot_count.write(meta.reg_index, count);
        meta.count = count;
    }

    // Block-sparse: the round's block is the one its first packet names; a later packet of the
    // same round naming another block is out of step (BAD_BLOCK, dropped before any other
    // register changes). Tofino: one RegisterAction (write on a new round, compare otherwise).
    action check_block() {
        bit<32> stored;
        block_index.read(stored, meta.reg_index);
        meta.block_index = (meta.new_round == 1) ? hdr.block.block : stored;
        meta.block_mismatch = (meta.block_index != hdr.block.block) ? 1w1 : 1w0;
        block_index.write(meta.reg_index, meta.block_index);
    }

    // Block-sparse: fold the packet's announcement into the round's minimum (a contribution
    // only: a retransmission repeats an announcement already folded in). Tofino: one
    // RegisterAction (min), fed the new-round and contribute bits.
    action update_next() {
        bit<32> stored;
        block_next.read(stored, meta.reg_index);
        bit<32> next = (meta.new_round == 1) ? hdr.block.next
                     : ((meta.contribute == 1 && hdr.block.next < stored) ? hdr.block.next
                                                                          : stored);
        block_next.write(meta.reg_index, next);
        meta.block_next = next;
    }

    apply {
        if ((bit<16>)hdr.hina.slot >= meta.n_slots) {
            meta.reason = REASON_BAD_SLOT;
        } else {
            meta.slot_index = meta.reg_base + (reg_index_t)hdr.hina.slot;
            meta.reg_index = (meta.slot_index << 1) | (reg_index_t)hdr.hina.pool;
            claim_copy();
            check_round();
            if (meta.stale == 0 && hdr.block.isValid()) {
                check_block();
            }
            if (meta.block_mismatch == 1) {
                meta.reason = REASON_BAD_BLOCK;
            } else {
                if (meta.stale == 0) {
                    update_bitmap();
                }
                if (meta.stale == 1) {
                    meta.reason = REASON_STALE_POOL;
                } else {
                    update_count();
                    if (hdr.block.isValid()) {
                        update_next();
                    }
                }
            }
        }
    }
}

// The result flags of a slot copy, after the lanes (sticky overflow of the current use).
control SlotFlags(inout headers_t hdr, inout metadata_t meta) {

    // FLAG_* of the current use of each slot copy. Written by this control.
    register<bit<8>, reg_index_t>(2 * HINA_SLOT_CAPACITY) slot_flags;

    action update_flags() {
        bit<8> flags;
        slot_flags.read(flags, meta.reg_index);
        flags = ((meta.new_round == 1) ? 8w0 : flags)
                | ((meta.lane_overflow == 1) ? (bit<8>)FLAG_OVERFLOW : 8w0);
        slot_flags.write(meta.reg_index, flags);
        meta.result_flags = flags;
    }

    apply {
        update_flags();
    }
}

#endif  // _HINA_SLOT_STATE_P4_
