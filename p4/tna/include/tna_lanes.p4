// Lanes on TNA: TNA_LANES 32-bit registers, lane_<i> aggregating word i of the block in work
// (words_a). Modes are separate RegisterActions on one register, picked per packet by a
// table (lane_<i>_select), as SwitchML's Processor picks its actions; Tofino 1 allows four per
// register:
//   or    the first contribution to a new use stores the word, whatever the op; after it,
//         bitwise or
//   add   SUM and THC's LUT-SUM (two 16-bit sums per word, exact while n * max(T) < 2^16, as in
//         v1model) add with signed saturation, sticky (below)
//   max   unsigned maximum
//   read  a retransmission into a complete copy
// Each returns the lane's new value, which replaces the word: the completing packet carries the
// result. Why one 32-bit register per word and not SwitchML's Register<pair> (two words per
// stateful ALU): a RegisterAction returns one 32-bit value on Tofino 1 (an action returning lo
// in one case and hi in another is refused: "Incompatible outputs"), so with pairs the second
// word of each pair would need another pass to be read (SwitchML's harvest passes).
//
// Overflow: SUM saturates at INT32_MAX / INT32_MIN (|+|) instead of wrapping and flagging; a
// stateful ALU has one output, taken by the result word, so there is no per-word overflow bit
// to or together. Saturation is sticky: a word at a bound keeps it for the rest of the use (a
// later contribution of the other sign would pull it back to a wrong value in range). So a
// RESULT word at a bound is the overflow signal on Tofino (the worker reads it as v1model's
// FLAG_OVERFLOW; a true sum of exactly a bound is flagged too), and a word within the bounds is
// exact: no partial sum left int32. The two bound checks take the stateful ALU's two
// conditions (each compares with one constant), which is why the store of a new use is the or
// action's, not the add's.
//
// Index: lane_index = reg_index * 2 + pass: block 0 of a slot copy in pass 0, block 1 in pass 1
// (tna_slot_state.p4 forms it).
//
// THC (LUT-SUM): the table lookup is match-action, in the switch. One table per byte of
// the block, lut_<i>: (lut_id, byte) -> the word (T[hi] << 16) | T[lo], the two coordinates'
// 16-bit table values in coordinate order; HINA_LUTS * 256 entries each. Per byte, not per
// coordinate (v1model's lut.p4): half the tables (a stage has 16), and the two values land in
// one word with no concatenation step. Workers send 4-bit indices: W bytes up per W words.
#ifndef _HINA_TNA_LANES_P4_
#define _HINA_TNA_LANES_P4_

#include "tna_headers.p4"

// Lane i's stage (hina_tna.p4: TNA_LANE_FIRST_STAGE), and its LUT table's. None without it.
//
// What bounds a stage here (Tofino 1, pipe/logs/resources.json per stage): four stateful ALUs
// and eight hash functions. Each lane's stateful ALU takes a whole hash function for its
// address (not shared between tables, even with a 16-bit index), the lane tables' meter address
// one more; each exact LUT table takes one (its ways' line select), and so do the sketch's hash
// steps (TnaSketchCells: second keys, buckets, second hashes, from stage F + 1 on) and the pair
// stream's stateful ALU (pair_next_seq) wants one of stage F's four. With each lut_<i> in the
// stage before its lane, a lane stage held four LUTs + five = nine hash functions of eight:
// lut_4 and lut_12 went three stages on and their lanes with them (14 stages); with every lane
// stage full of lanes the pair stream and the sketch after it went after the lanes (15). So:
//   * lanes: three in stage F (the fourth stateful ALU is the pair stream's), then four per
//     stage (F + (i + 1) / 4: 16 lanes end in F + 4 = 8, beside the sketch's second hashes);
//   * LUTs by hand, exact (a hash function each) where hash functions are free, ternary (TCAM,
//     no hash function: eight of a stage's 24 blocks for HINA_LUTS * 256 entries) where not:
//     F - 1: lut 0-4 exact, 5-7 ternary; F: 8-10 exact, 11-12 ternary; F + 1: 13 ternary;
//     F + 2: 14-15 ternary; from 16 (Tofino 2) exact, the stage before the lane.
// A ternary LUT's entries are the exact ones with a full mask on the byte.
#ifdef TNA_LANE_FIRST_STAGE
#define TNA_LANE_STAGE(i) @stage(TNA_LANE_FIRST_STAGE + ((i) + 1) / TNA_LANES_PER_STAGE)
#define TNA_LUT_STAGE(i) @stage(TNA_LUT_STAGE_##i)
#else
#define TNA_LANE_STAGE(i)
#define TNA_LUT_STAGE(i)
#endif
#define TNA_LUT_KIND(i) TNA_LUT_KIND_##i
#define TNA_LUT_STAGE_0 TNA_LANE_FIRST_STAGE - 1
#define TNA_LUT_STAGE_1 TNA_LANE_FIRST_STAGE - 1
#define TNA_LUT_STAGE_2 TNA_LANE_FIRST_STAGE - 1
#define TNA_LUT_STAGE_3 TNA_LANE_FIRST_STAGE - 1
#define TNA_LUT_STAGE_4 TNA_LANE_FIRST_STAGE - 1
#define TNA_LUT_STAGE_5 TNA_LANE_FIRST_STAGE - 1
#define TNA_LUT_STAGE_6 TNA_LANE_FIRST_STAGE - 1
#define TNA_LUT_STAGE_7 TNA_LANE_FIRST_STAGE - 1
#define TNA_LUT_STAGE_8 TNA_LANE_FIRST_STAGE
#define TNA_LUT_STAGE_9 TNA_LANE_FIRST_STAGE
#define TNA_LUT_STAGE_10 TNA_LANE_FIRST_STAGE
#define TNA_LUT_STAGE_11 TNA_LANE_FIRST_STAGE
#define TNA_LUT_STAGE_12 TNA_LANE_FIRST_STAGE
#define TNA_LUT_STAGE_13 TNA_LANE_FIRST_STAGE + 1
#define TNA_LUT_STAGE_14 TNA_LANE_FIRST_STAGE + 2
#define TNA_LUT_STAGE_15 TNA_LANE_FIRST_STAGE + 2
#define TNA_LUT_STAGE_16 TNA_LANE_FIRST_STAGE - 1 + (16 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_17 TNA_LANE_FIRST_STAGE - 1 + (17 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_18 TNA_LANE_FIRST_STAGE - 1 + (18 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_19 TNA_LANE_FIRST_STAGE - 1 + (19 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_20 TNA_LANE_FIRST_STAGE - 1 + (20 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_21 TNA_LANE_FIRST_STAGE - 1 + (21 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_22 TNA_LANE_FIRST_STAGE - 1 + (22 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_23 TNA_LANE_FIRST_STAGE - 1 + (23 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_24 TNA_LANE_FIRST_STAGE - 1 + (24 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_25 TNA_LANE_FIRST_STAGE - 1 + (25 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_26 TNA_LANE_FIRST_STAGE - 1 + (26 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_27 TNA_LANE_FIRST_STAGE - 1 + (27 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_28 TNA_LANE_FIRST_STAGE - 1 + (28 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_29 TNA_LANE_FIRST_STAGE - 1 + (29 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_30 TNA_LANE_FIRST_STAGE - 1 + (30 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_STAGE_31 TNA_LANE_FIRST_STAGE - 1 + (31 + 1) / TNA_LANES_PER_STAGE
#define TNA_LUT_KIND_0 exact
#define TNA_LUT_KIND_1 exact
#define TNA_LUT_KIND_2 exact
#define TNA_LUT_KIND_3 exact
#define TNA_LUT_KIND_4 exact
#define TNA_LUT_KIND_5 ternary
#define TNA_LUT_KIND_6 ternary
#define TNA_LUT_KIND_7 ternary
#define TNA_LUT_KIND_8 exact
#define TNA_LUT_KIND_9 exact
#define TNA_LUT_KIND_10 exact
#define TNA_LUT_KIND_11 ternary
#define TNA_LUT_KIND_12 ternary
#define TNA_LUT_KIND_13 ternary
#define TNA_LUT_KIND_14 ternary
#define TNA_LUT_KIND_15 ternary
#define TNA_LUT_KIND_16 exact
#define TNA_LUT_KIND_17 exact
#define TNA_LUT_KIND_18 exact
#define TNA_LUT_KIND_19 exact
#define TNA_LUT_KIND_20 exact
#define TNA_LUT_KIND_21 exact
#define TNA_LUT_KIND_22 exact
#define TNA_LUT_KIND_23 exact
#define TNA_LUT_KIND_24 exact
#define TNA_LUT_KIND_25 exact
#define TNA_LUT_KIND_26 exact
#define TNA_LUT_KIND_27 exact
#define TNA_LUT_KIND_28 exact
#define TNA_LUT_KIND_29 exact
#define TNA_LUT_KIND_30 exact
#define TNA_LUT_KIND_31 exact

control TnaThcLut(inout tna_headers_t hdr, inout tna_ingress_metadata_t meta) {

// Written by the controller: for each LUT id, all 256 entries (1, lut_id, byte) -> word per
// table (the first key field: the THC indices are there). A miss (a
// job whose LUT is not installed) leaves the word 0: no shared miss flag, since every table
// writing one field would chain the tables one stage each (v1model drops such a packet as
// BAD_JOB; the controller installs a job's LUT before the job, so misses do not happen).
#define TNA_LUT_TABLE(i) \
    action set_word_##i(bit<32> value) { hdr.words_a.w##i = value; } \
    TNA_LUT_STAGE(i) \
    table lut_##i { \
        key = { \
            hdr.thc_a.isValid() : exact @name("thc"); \
            meta.lut_id : exact @name("lut_id"); \
            hdr.thc_a.b##i : TNA_LUT_KIND(i) @name("byte"); \
        } \
        actions = { set_word_##i; @defaultonly NoAction; } \
        size = HINA_LUTS * 256; \
        default_action = NoAction(); \
    }
    TNA_FOR_EACH_LANE(TNA_LUT_TABLE)

#define TNA_LUT_APPLY(i) lut_##i.apply();

    // The block's words replace its indices on the way out.
    action words_for_indices() {
        hdr.words_a.setValid();
        hdr.thc_a.setInvalid();
    }
    table thc_block {
        key = {
            hdr.thc_a.isValid(): exact @name("thc");
        }
        actions = {
            words_for_indices;
            NoAction;
        }
        const entries = {
            true : words_for_indices();
        }
        size = 1;
        const default_action = NoAction();
    }

    // Plain tables with no gateway of their own (a THC packet is one whose indices were parsed:
    // the keys' first field), so that the compiler places each one freely in the stage before
    // its lane (Tofino 1 places a gateway's block after everything before it in sequence).
    apply {
        TNA_FOR_EACH_LANE(TNA_LUT_APPLY)
        thc_block.apply();
    }
}

control TnaLanes(inout tna_headers_t hdr, inout tna_ingress_metadata_t meta) {

// Lane i: its register (both blocks of every slot copy), its four RegisterActions, and the
// table that picks one per packet. The table keys on what the slot state found, not on a mode
// computed from it: a stage saved before the lanes is four more lanes on Tofino 1.
//   new use of the copy                 -> or (it stores the word: new_round)
//   the worker's bit already set        -> read (a retransmission; dropped unless complete)
//   else by op: MAX -> max, OR -> or, SUM and LUT-SUM -> add
// (A drained copy, bitmap 0 and no new use, takes the op: harmless, the copy's next use starts
// with a store, and the packet is dropped as STALE_POOL.) Pass 1 takes pass 0's inputs from the
// pass header, so it picks the same.
#define TNA_LANE_GO 1w1, 1w0, MSG_AGGREGATE
// The bounds where a sum sticks (the add action). The stateful ALU compares with a constant
// it adds, so INT32_MIN is spelled as "> INT32_MIN + 1 - 1" would not be: value > -2^31 is
// value >= -(2^31 - 1), whose negation fits 32 bits.
#define TNA_INT32_MAX 2147483647
#define TNA_INT32_MIN_PLUS_1 -2147483647
#define TNA_LANE_SEEN(i, w, b) \
        (TNA_LANE_GO, 1w0, _, w, b &&& b) : lane_##i##_read_action();
#define TNA_LANE(i) \
    Register<int<32>, bit<32>>(2 * TNA_BLOCKS * HINA_SLOT_CAPACITY) lane_##i; \
    RegisterAction<int<32>, bit<32>, int<32>>(lane_##i) lane_##i##_add = { \
        void apply(inout int<32> value, out int<32> result) { \
            if (value < TNA_INT32_MAX && value >= TNA_INT32_MIN_PLUS_1) { \
                value = value |+| (int<32>)hdr.words_a.w##i; \
            } \
            result = value; \
        } \
    }; \
    RegisterAction<int<32>, bit<32>, int<32>>(lane_##i) lane_##i##_max = { \
        void apply(inout int<32> value, out int<32> result) { \
            if ((bit<32>)value < hdr.words_a.w##i) { \
                value = (int<32>)hdr.words_a.w##i; \
            } \
            result = value; \
        } \
    }; \
    RegisterAction<int<32>, bit<32>, int<32>>(lane_##i) lane_##i##_or = { \
        void apply(inout int<32> value, out int<32> result) { \
            if (meta.new_round == 1) { \
                value = (int<32>)hdr.words_a.w##i; \
            } else { \
                value = value | (int<32>)hdr.words_a.w##i; \
            } \
            result = value; \
        } \
    }; \
    RegisterAction<int<32>, bit<32>, int<32>>(lane_##i) lane_##i##_read = { \
        void apply(inout int<32> value, out int<32> result) { \
            result = value; \
        } \
    }; \
    action lane_##i##_add_action() { \
        hdr.words_a.w##i = (bit<32>)lane_##i##_add.execute(meta.lane_index); \
    } \
    action lane_##i##_max_action() { \
        hdr.words_a.w##i = (bit<32>)lane_##i##_max.execute(meta.lane_index); \
    } \
    action lane_##i##_or_action() { \
        hdr.words_a.w##i = (bit<32>)lane_##i##_or.execute(meta.lane_index); \
    } \
    action lane_##i##_read_action() { \
        hdr.words_a.w##i = (bit<32>)lane_##i##_read.execute(meta.lane_index); \
    } \
    TNA_LANE_STAGE(i) \
    table lane_##i##_select { \
        key = { \
            meta.in_slot:        ternary; \
            meta.stale:          ternary; \
            hdr.hina.msg_type:   ternary; \
            meta.new_round:      ternary; \
            hdr.hina.op:         ternary; \
            meta.worker_id:      ternary; \
            meta.bitmap_old:     ternary; \
        } \
        actions = { \
            lane_##i##_add_action; \
            lane_##i##_max_action; \
            lane_##i##_or_action; \
            lane_##i##_read_action; \
            NoAction; \
        } \
        const entries = { \
            (TNA_LANE_GO, 1w1, _, _, _) : lane_##i##_or_action(); \
            TNA_FOR_EACH_WORKER_WITH(TNA_LANE_SEEN, i) \
            (TNA_LANE_GO, _, OP_MAX, _, _) : lane_##i##_max_action(); \
            (TNA_LANE_GO, _, OP_OR, _, _) : lane_##i##_or_action(); \
            (TNA_LANE_GO, _, _, _, _) : lane_##i##_add_action(); \
        } \
        size = 40; \
        const default_action = NoAction(); \
    }
    TNA_FOR_EACH_LANE(TNA_LANE)

#define TNA_LANE_APPLY(i) lane_##i##_select.apply();

    // No gateway: whether the packet reached the lanes (an AGGREGATE packet in a slot copy of the
    // pool it names) is part of each table's key, so the lanes are placed by their dependencies
    // alone (a gateway around them made the compiler wait for every LUT table first).
    apply {
        TNA_FOR_EACH_LANE(TNA_LANE_APPLY)
    }
}

#endif  // _HINA_TNA_LANES_P4_
