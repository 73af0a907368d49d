// Block-sparse aggregation on TNA (the TNA_BLOCK_SPARSE=1 profile of hina_tna.p4): what is not
// in the slot state. The protocol: docs/protocol.md, "Block-sparse aggregation"; the v1model
// program's: p4/include/block_sparse.p4 and slot_state.p4 (check_block, update_next).
//   * block_index (tna_slot_state.p4, stage 3): a new round stores the packet's block, the same
//     round compares it; a mismatch is BAD_BLOCK before the bitmap is touched.
//   * block_next (here): the smallest `next` announced in the current round of each slot copy,
//     i.e. the next block the slot aggregates once the round is complete. Picked like a lane
//     (tna_lanes.p4): a new round stores the packet's `next`, a worker already counted (a
//     retransmission) only reads, a copy with no use yet (STALE_POOL) is left alone, any other
//     contribution takes the minimum. The value returned replaces the packet's `next`, so the
//     RESULT (the last pass's packet) carries the round's minimum in its block header.
//     A plain table keyed on its gate, not under the slot state's gateway: Tofino 1 places a
//     gateway's block after everything before it in sequence, and what follows it after all
//     of its tables (the lanes would wait for it). Pinned to the stage of the last lane, whose
//     stage has stateful ALUs to spare (TNA_LANES % 4 < 3): no stage of its own.
//   * a BLOCK_SKIP's two blocks are made valid and zero in pass 0 (hina_tna.p4, block_request), so
//     the lanes add zeros and a completing SKIP carries the result out.
#ifndef _HINA_TNA_BLOCK_SPARSE_P4_
#define _HINA_TNA_BLOCK_SPARSE_P4_

#include "tna_headers.p4"

#ifdef TNA_LANE_FIRST_STAGE
#define TNA_BLOCK_NEXT_STAGE @stage(TNA_LANE_FIRST_STAGE + TNA_LANES / TNA_LANES_PER_STAGE)
#else
#define TNA_BLOCK_NEXT_STAGE
#endif

control TnaBlockNext(inout tna_headers_t hdr, inout tna_ingress_metadata_t meta) {

    // Index reg_index (the slot copy), as block_index and v1model's block_next.
    Register<bit<32>, bit<32>>(2 * HINA_SLOT_CAPACITY) block_next;
    RegisterAction<bit<32>, bit<32>, bit<32>>(block_next) next_first = {
        void apply(inout bit<32> value, out bit<32> result) {
            value = hdr.block.next;
            result = value;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(block_next) next_min = {
        void apply(inout bit<32> value, out bit<32> result) {
            if (hdr.block.next < value) {
                value = hdr.block.next;
            }
            result = value;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(block_next) next_read = {
        void apply(inout bit<32> value, out bit<32> result) {
            result = value;
        }
    };

    action next_first_action() {
        hdr.block.next = next_first.execute(meta.reg_index);
    }
    action next_min_action() {
        hdr.block.next = next_min.execute(meta.reg_index);
    }
    action next_read_action() {
        hdr.block.next = next_read.execute(meta.reg_index);
    }

    // Pass 0 of a block-sparse packet in a slot copy, not stale (nor BAD_BLOCK: stale too).
#define TNA_NEXT_GO 1w0, 1w1, 1w0, true
#define TNA_NEXT_SEEN(a, w, b) (TNA_NEXT_GO, 1w0, w, b &&& b) : next_read_action();
    TNA_BLOCK_NEXT_STAGE
    table block_next_update {
        key = {
            meta.recirculated:   ternary;
            meta.in_slot:        ternary;
            meta.stale:          ternary;
            hdr.block.isValid(): ternary @name("block");
            meta.new_round:      ternary;
            meta.worker_id:      ternary;
            meta.bitmap_old:     ternary;
        }
        actions = {
            next_first_action;
            next_min_action;
            next_read_action;
            NoAction;
        }
        const entries = {
            (TNA_NEXT_GO, 1w1, _, _) : next_first_action();
            TNA_FOR_EACH_WORKER_WITH(TNA_NEXT_SEEN, 0)
            (TNA_NEXT_GO, 1w0, _, 0) : NoAction();
            (TNA_NEXT_GO, 1w0, _, _) : next_min_action();
        }
        size = 40;
        const default_action = NoAction();
    }

    apply {
        block_next_update.apply();
    }
}

#endif  // _HINA_TNA_BLOCK_SPARSE_P4_
