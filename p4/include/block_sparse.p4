// Block-sparse aggregation (OmniReduce-style; docs/protocol.md, "Block-sparse aggregation").
//
// A slot aggregates a stream of blocks, one block per round (one use of a slot copy, as in the
// dense path: same seq, pool, bitmap and generation rules, so the same loss safety). Every worker
// speaks once per round: BLOCK_SUM with its lanes when its block is nonzero, BLOCK_SKIP (the
// block header alone, 66 B on the wire instead of 8 + 4 * HINA_WORDS more) when it is zero; both
// announce the sender's next nonzero block. The round is complete when every worker has spoken
// (count == n_workers); its RESULT carries the sum, the block and the minimum announced next:
// the next block the slot aggregates. Blocks zero at every worker are never sent at all.
// The per-copy registers block_index and block_next live in SlotState (slot_state.p4): they are
// read and written between its round check and its bitmap update.
#ifndef _HINA_BLOCK_SPARSE_P4_
#define _HINA_BLOCK_SPARSE_P4_

#include "headers.p4"

// A BLOCK_SKIP contributes a zero block: materialise its lanes so that the lane ALU adds zeros
// (on the round's first packet it stores them) and a completing SKIP carries the result out.
control BlockSkip(inout headers_t hdr, inout metadata_t meta) {

#define HINA_ZERO_WORD(i) hdr.words.w##i = 0;

    action zero_block() {
        hdr.words.setValid();
        HINA_FOR_EACH_WORD(HINA_ZERO_WORD)
    }

    apply {
        zero_block();
    }
}

#endif  // _HINA_BLOCK_SPARSE_P4_
