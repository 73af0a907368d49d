// The slot bitmap's declarations (tna_slot_state.p4), included inside a control: part 1 the
// register and its RegisterActions, part 2 the actions and the table that drives them
// (TNA_SLOT_BITMAP_PART). The default build includes both parts inside TnaSlotState, as they
// were written there; the block-sparse profile includes them in TnaSlotBitmap, applied after
// the slot state's gateway block (that block then ends with block_index in stage 3, as the
// default's ends with the bitmap in stage 3, so what follows it starts no later).
#if TNA_SLOT_BITMAP_PART == 1
    // Contributors of both copies of each slot; index slot_base ^ slot.
    Register<bitmap_pair_t, bit<32>>(HINA_SLOT_CAPACITY) slot_bitmap;
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(slot_bitmap) new_use_0 = {
        void apply(inout bitmap_pair_t value) {
            value.lo = meta.worker_bit;
        }
    };
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(slot_bitmap) new_use_1 = {
        void apply(inout bitmap_pair_t value) {
            value.hi = meta.worker_bit;
        }
    };
    // Returns the copy's bitmap before the packet. A copy with no bits (no use yet) is left
    // alone: the packet is stale.
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(slot_bitmap) contribute_0 = {
        void apply(inout bitmap_pair_t value, out bit<32> before) {
            before = value.lo;
            if (value.lo != 0) {
                value.lo = value.lo | meta.worker_bit;
            }
        }
    };
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(slot_bitmap) contribute_1 = {
        void apply(inout bitmap_pair_t value, out bit<32> before) {
            before = value.hi;
            if (value.hi != 0) {
                value.hi = value.hi | meta.worker_bit;
            }
        }
    };

#else
    // Stage 3: one table drives the bitmap's four RegisterActions (one hash unit forms the
    // index for all of them).
    action new_use_0_action() {
        new_use_0.execute(slot_hash.get({meta.slot_base, 17w0, hdr.hina.slot}));
        meta.new_round = 1;
    }
    action new_use_1_action() {
        new_use_1.execute(slot_hash.get({meta.slot_base, 17w0, hdr.hina.slot}));
        meta.new_round = 1;
    }
    action contribute_0_action() {
        meta.bitmap_old = contribute_0.execute(slot_hash.get({meta.slot_base, 17w0, hdr.hina.slot}));
    }
    action contribute_1_action() {
        meta.bitmap_old = contribute_1.execute(slot_hash.get({meta.slot_base, 17w0, hdr.hina.slot}));
    }
    action stale_copy() {
        meta.stale = 1;                         // an older use of this copy (STALE_POOL)
    }
#if TNA_BLOCK_SPARSE
    // Out of step: nothing else changes (no bit, no lane, no next), dropped as BAD_BLOCK.
    action block_mismatch() {
        meta.stale = 1;
        meta.block_bad = 1;
    }
#endif
    table slot_bitmap_update {
        key = {
            meta.seq_order: exact;
            hdr.hina.pool:  exact;
#if TNA_BLOCK_SPARSE
            meta.block_check: exact;
#endif
        }
        actions = {
            new_use_0_action;
            new_use_1_action;
            contribute_0_action;
            contribute_1_action;
            stale_copy;
#if TNA_BLOCK_SPARSE
            block_mismatch;
            NoAction;
#endif
        }
        const entries = {
            TNA_BITMAP_ROW(ORDER_NEWER, 0, new_use_0_action)
            TNA_BITMAP_ROW(ORDER_NEWER, 1, new_use_1_action)
            TNA_BITMAP_ROW(ORDER_SAME, 0, contribute_0_action)
            TNA_BITMAP_ROW(ORDER_SAME, 1, contribute_1_action)
#if TNA_BLOCK_SPARSE
            (ORDER_SAME, 0, BLOCK_MISMATCH) : block_mismatch();
            (ORDER_SAME, 1, BLOCK_MISMATCH) : block_mismatch();
            (ORDER_OLDER, 0, 0) : stale_copy();
            (ORDER_OLDER, 1, 0) : stale_copy();
        }
        size = 12;
        const default_action = NoAction();   // not through the slot state (seq_order 0)
#else
        }
        size = 4;
        const default_action = stale_copy();
#endif
    }

#endif
