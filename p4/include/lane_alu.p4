// The lane ALU: one 32-bit register array per payload word, updated a pair of words (2p, 2p+1)
// per action, as SwitchML pairs them (a Register<pair> RegisterAction on Tofino). Not one 64-bit
// array per pair: BMv2's Thrift runtime, the only way to read registers there (its P4Runtime
// has no RegisterEntry), returns a cell as a signed 64-bit integer, so a pair whose upper word is
// negative would read back saturated at 2^63 - 1 and the control plane could not inspect it.
//
// meta.alu_mode selects the operation; meta.keep_mask is 0 for the first contribution to a new
// use of a slot copy (so the old result is overwritten, no reset pass needed) and all ones after.
// The packet's words are replaced by the new values, so a completing packet carries the result.
#ifndef _HINA_LANE_ALU_P4_
#define _HINA_LANE_ALU_P4_

#include "headers.p4"

// One word of the ALU inside an action: old value OLD, packet word IN; declares r_<x>, the new
// value, and ors the word's overflow into meta.lane_overflow.
#define HINA_ALU_WORD(x, OLD, IN) \
    bit<32> a_##x = (OLD) & meta.keep_mask; \
    bit<32> b_##x = IN; \
    bit<32> s_##x = a_##x + b_##x; \
    bit<32> o_##x = (a_##x ^ s_##x) & (b_##x ^ s_##x); \
    bit<32> r_##x = (meta.alu_mode == ALU_MAX) ? ((a_##x > b_##x) ? a_##x : b_##x) \
                  : ((meta.alu_mode == ALU_OR) ? (a_##x | b_##x) \
                  : ((meta.alu_mode == ALU_READ) ? (OLD) : s_##x)); \
    meta.lane_overflow = meta.lane_overflow | (o_##x[31:31] & meta.check_overflow);

control LaneAlu(inout headers_t hdr, inout metadata_t meta) {

// Words i = 2p and j = 2p+1 of every slot copy. Written by this control only; read back by the
// control plane for inspection.
#define HINA_LANE_PAIR(p, i, j) \
    register<bit<32>, reg_index_t>(2 * HINA_SLOT_CAPACITY) lanes_##i; \
    register<bit<32>, reg_index_t>(2 * HINA_SLOT_CAPACITY) lanes_##j; \
    action alu_##p() { \
        bit<32> old_hi; \
        bit<32> old_lo; \
        lanes_##i.read(old_hi, meta.reg_index); \
        lanes_##j.read(old_lo, meta.reg_index); \
        HINA_ALU_WORD(hi, old_hi, hdr.words.w##i) \
        HINA_ALU_WORD(lo, old_lo, hdr.words.w##j) \
        lanes_##i.write(meta.reg_index, r_hi); \
        lanes_##j.write(meta.reg_index, r_lo); \
        hdr.words.w##i = r_hi; \
        hdr.words.w##j = r_lo; \
    }
    HINA_FOR_EACH_WORD_PAIR(HINA_LANE_PAIR)

#define HINA_LANE_PAIR_APPLY(p, i, j) alu_##p();

    apply {
        HINA_FOR_EACH_WORD_PAIR(HINA_LANE_PAIR_APPLY)
    }
}

#endif  // _HINA_LANE_ALU_P4_
