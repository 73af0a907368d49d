// In-switch count sketch: workers stream sparse (index, value) pairs; the switch adds
// sign(h) * value to counter bucket(h) of each row, with, for row r of a job with seed S,
//     seed_r = S + r, off_r = seed_r * 0x9E3779B1, F_r(x) = crc32(be32(seed_r) ++ be32(x + off_r))
//     h = F_r(F_r(index)), bucket = h & (columns - 1), sign = -1 iff h[31:31]   (all mod 2^32)
// (hina/hashing.py is the reference; hina/testdata/sketch_hash_vectors.json pins it. The row
// offset and the second pass break the affinity of CRC: with a bare CRC all rows would collide
// alike; see hina/hashing.py.)
//
// Exactly once: each worker has a PAIRS stream with a next sequence number. A packet with
// seq == next is added and acknowledged; seq < next (a retransmission) is only acknowledged;
// seq > next is dropped (OUT_OF_ORDER) so the worker resends in order (go-back-N). A stream
// last used by another generation of the job starts again at 0 (its next number is reclaimed,
// as SlotState reclaims slot copies), so a restarted worker streams from seq 0.
//
// Tofino: each row array is updated HINA_PAIRS times per packet here, which a Tofino stage
// cannot do; see docs/dataplane.md for the one-pair-per-pass mapping.
#ifndef _HINA_SKETCH_P4_
#define _HINA_SKETCH_P4_

#include "headers.p4"

control SketchUpdate(inout headers_t hdr, inout metadata_t meta) {

    // Next expected PAIRS sequence number of each worker stream. Written by this control; the
    // controller zeroes a job's streams when it installs the job.
    register<bit<32>, reg_index_t>(HINA_PAIR_STREAMS) pair_next_seq;
    // Job generation that last used each stream (0 = never). Written by this control; the
    // controller zeroes a job's streams when it installs the job.
    register<bit<16>, reg_index_t>(HINA_PAIR_STREAMS) pair_generation;

    // Claim the stream for the packet's generation (the job's current one). Tofino: a
    // RegisterAction on pair_generation returning (old != generation), before pair_next_seq's.
    action claim_stream() {
        bit<16> stored;
        pair_generation.read(stored, meta.pair_stream);
        meta.reclaim = (stored != meta.generation) ? 1w1 : 1w0;
        pair_generation.write(meta.pair_stream, meta.generation);
    }

    // Tofino: a RegisterAction on pair_next_seq with the reclaim bit as input.
    action check_pair_seq() {
        bit<32> stored;
        pair_next_seq.read(stored, meta.pair_stream);
        bit<32> next = (meta.reclaim == 1) ? 32w0 : stored;
        bit<32> diff = hdr.hina.seq - next;
        meta.pairs_apply = (diff == 0) ? 1w1 : 1w0;
        meta.pairs_old = (diff[31:31] == 1) ? 1w1 : 1w0;
        pair_next_seq.write(meta.pair_stream, (diff == 0) ? next + 1 : next);
    }

// Counters of sketch row r for all jobs. Written by this control (PAIRS, RESET); read by HARVEST.
#define HINA_SKETCH_ROW_REGISTER(r) \
    register<bit<32>, reg_index_t>(HINA_SKETCH_CAPACITY) sketch_row_##r;
    HINA_FOR_EACH_ROW(HINA_SKETCH_ROW_REGISTER)

// Add pair p to row r.
#define HINA_SKETCH_ADD(p, r) \
    action sketch_add_##p##_##r() { \
        bit<32> key1 = hdr.pairs.index##p + meta.row_offset##r; \
        bit<32> h1; \
        hash(h1, HashAlgorithm.crc32, 32w0, { meta.seed##r, key1 }, 64w0x100000000); \
        bit<32> key2 = h1 + meta.row_offset##r; \
        bit<32> h; \
        hash(h, HashAlgorithm.crc32, 32w0, { meta.seed##r, key2 }, 64w0x100000000); \
        reg_index_t cell = meta.sketch_base + (h & meta.sketch_mask); \
        bit<32> old; \
        sketch_row_##r.read(old, cell); \
        bit<32> v = (h[31:31] == 1) ? -hdr.pairs.value##p : hdr.pairs.value##p; \
        bit<32> s = old + v; \
        bit<32> o = (old ^ s) & (v ^ s); \
        meta.lane_overflow = meta.lane_overflow | o[31:31]; \
        sketch_row_##r.write(cell, s); \
    }
#define HINA_SKETCH_ADD_PAIR(p) HINA_FOR_EACH_ROW_WITH(HINA_SKETCH_ADD, p)
    HINA_FOR_EACH_PAIR(HINA_SKETCH_ADD_PAIR)

// Per packet and row: seed_r and its index offset (Tofino: installed by the controller instead).
#define HINA_SEED_ROW(r) \
    meta.seed##r = meta.sketch_seed + r; \
    meta.row_offset##r = meta.seed##r * HINA_ROW_OFFSET_MULTIPLIER;
#define HINA_SKETCH_CALL(p, r) sketch_add_##p##_##r();
#define HINA_SKETCH_CALL_PAIR(p) HINA_FOR_EACH_ROW_WITH(HINA_SKETCH_CALL, p)

// HARVEST reads one block of one row into the words header; RESET zeroes it.
#define HINA_HARVEST_READ(r, i) sketch_row_##r.read(hdr.words.w##i, meta.harvest_base + i);
#define HINA_RESET_WRITE(r, i) sketch_row_##r.write(meta.harvest_base + i, 0);
#define HINA_HARVEST_ACTIONS(r) \
    action harvest_row_##r() { HINA_FOR_EACH_WORD_WITH(HINA_HARVEST_READ, r) } \
    action reset_row_##r() { HINA_FOR_EACH_WORD_WITH(HINA_RESET_WRITE, r) }
    HINA_FOR_EACH_ROW(HINA_HARVEST_ACTIONS)

#define HINA_HARVEST_DISPATCH(r) \
    if (hdr.harvest.row == r) { \
        if (hdr.hina.msg_type == MSG_HARVEST) { harvest_row_##r(); } else { reset_row_##r(); } \
    }

    apply {
        if (meta.sketch_mask == 0) {
            // The job has no in-switch sketch: its counters would be someone else's.
            meta.reason = REASON_BAD_JOB;
        } else if (hdr.hina.msg_type == MSG_PAIRS) {
            claim_stream();
            check_pair_seq();
            if (meta.pairs_apply == 1) {
                HINA_FOR_EACH_ROW(HINA_SEED_ROW)
                HINA_FOR_EACH_PAIR(HINA_SKETCH_CALL_PAIR)
                if (meta.lane_overflow == 1) {
                    meta.reason = REASON_OVERFLOW;
                }
            }
            if (meta.pairs_apply == 1 || meta.pairs_old == 1) {
                meta.reply = REPLY_UNICAST;
            } else {
                meta.reason = REASON_OUT_OF_ORDER;
            }
        } else {
            // HARVEST or RESET: the whole block must lie inside the job's columns.
            bit<32> offset = ((bit<32>)hdr.harvest.block) << HINA_WORDS_LOG2;
            if (hdr.harvest.row >= HINA_SKETCH_ROWS
                    || ((offset | (HINA_WORDS - 1)) & ~meta.sketch_mask) != 0) {
                meta.reason = REASON_BAD_SLOT;
            } else {
                meta.harvest_base = meta.sketch_base + offset;
                if (hdr.hina.msg_type == MSG_HARVEST) {
                    hdr.words.setValid();
                }
                HINA_FOR_EACH_ROW(HINA_HARVEST_DISPATCH)
                meta.reply = REPLY_UNICAST;
            }
        }
    }
}

#endif  // _HINA_SKETCH_P4_
