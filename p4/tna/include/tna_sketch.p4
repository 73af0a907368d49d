// In-switch count sketch on TNA. Same hash as p4/include/sketch.p4 and hina/hashing.py, bit for
// bit: for row r, h = F_r(F_r(index)) with F_r(x) = crc32(be32(seed_r) ++ be32(x + off_r)),
// bucket = h & mask, sign = -1 iff h[31:31]. TNA's CRC32 (HashAlgorithm_t.CRC32: reflected
// 0x04C11DB7, init and final xor 0xFFFFFFFF) is zlib's, over the fields in order, big-endian, as
// BMv2's crc32 is. seed_r and off_r = seed_r * 0x9E3779B1 come from job_config (tna_admission).
//
// A row register can be updated once per pass, so a PAIRS packet takes a pass per pair: the
// parser and deparser rotate the pairs (tna_parser.p4), pass p works on pair p. Where:
//   * ingress, pass 0 only: the stream's sequence check (pair_generation, pair_next_seq);
//   * ingress, every pass: the pair's cell in each row (two CRC passes, mask, base: stages
//     1-5, no stateful ALU), into the bridged header;
//   * egress of the recirculation port's pipe: the rows' RegisterActions. Every pass of a PAIRS
//     packet is recirculated (pass p adds pair p on its way round; pass HINA_PAIRS sends the
//     ACK), so the rows need no ingress stateful ALU: those are the lanes'.
// HARVEST and RESET read or zero HINA_WORDS counters of one row, a pass each on Tofino: the TNA
// program leaves them to the control plane (register reads and writes).
#ifndef _HINA_TNA_SKETCH_P4_
#define _HINA_TNA_SKETCH_P4_

#include "tna_headers.p4"

// Predicate outcomes of check_pair_seq (one-hot, as ORDER_* in tna_slot_state.p4).
#define PAIRS_IN_ORDER 2   // lo: seq == next
#define PAIRS_OLD 4        // hi: seq < next (serial order): applied before

control TnaPairStream(inout tna_headers_t hdr, inout tna_ingress_metadata_t meta) {

    // Job generation that last used each PAIRS stream (0 = never).
    Register<bit<16>, bit<32>>(HINA_PAIR_STREAMS) pair_generation;
    RegisterAction<bit<16>, bit<32>, bit<16>>(pair_generation) claim_stream = {
        void apply(inout bit<16> value, out bit<16> stored) {
            stored = value;
            value = meta.generation;
        }
    };

    // Next expected PAIRS sequence number of each stream.
    Register<bit<32>, bit<32>>(HINA_PAIR_STREAMS) pair_next_seq;
    // A reclaimed stream starts again at 0: seq 0 is taken, anything else is out of order.
    RegisterAction<bit<32>, bit<32>, bit<4>>(pair_next_seq) restart_stream = {
        void apply(inout bit<32> value, out bit<4> order) {
            order = this.predicate(hdr.hina.seq == 0);
            if (hdr.hina.seq == 0) {
                value = 1;
            } else {
                value = 0;
            }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<4>>(pair_next_seq) check_pair_seq = {
        void apply(inout bit<32> value, out bit<4> order) {
            // lo: in order, hi: old (RegisterActions take no local variables).
            order = this.predicate(value == hdr.hina.seq, (int<32>)(value - hdr.hina.seq) > 0);
            if (value == hdr.hina.seq) {
                value = value + 1;
            }
        }
    };

    apply {
        meta.stream_generation = claim_stream.execute(meta.pair_stream);
        if (meta.stream_generation != meta.generation) {
            meta.stream_order = restart_stream.execute(meta.pair_stream);
        } else {
            meta.stream_order = check_pair_seq.execute(meta.pair_stream);
        }
    }
}

// Ingress: the cells of the pair in work, one dependent step per action (an action runs in one
// stage; a hash result can be an operand of the action that computes it). The last step only
// copies: an add cannot write a bridged field (the bridge's PHV layout splits it).
control TnaSketchCells(inout tna_headers_t hdr, inout tna_ingress_metadata_t meta) {

#define TNA_SKETCH_CELL_HASHES(r) \
    Hash<bit<32>>(HashAlgorithm_t.CRC32) first_pass_##r; \
    Hash<bit<32>>(HashAlgorithm_t.CRC32) second_pass_##r; \
    Hash<bit<32>>(HashAlgorithm_t.CRC32) second_pass_sign_##r;
    HINA_FOR_EACH_ROW(TNA_SKETCH_CELL_HASHES)

// The steps without a hash for every row in one action (one logical table per step, not per
// row and step: a stage has 16 logical tables, and the lanes' stages are full of them). A hash
// result reaches an action through its 32-bit immediate path: one hash per action, so the hash
// steps stay one action per row.
#define TNA_FIRST_KEY(r) meta.key##r = hdr.pair.index + meta.row_offset##r;
#define TNA_HASH_STEPS(r) \
    action second_key_##r() { \
        meta.key##r = first_pass_##r.get({meta.seed##r, meta.key##r}) + meta.row_offset##r; \
    } \
    action bucket_##r() { \
        meta.bucket##r = second_pass_##r.get({meta.seed##r, meta.key##r}) & meta.sketch_mask; \
    } \
    action second_hash_##r() { meta.h##r = second_pass_sign_##r.get({meta.seed##r, meta.key##r}); }
#define TNA_SIGN(r) hdr.bridge.neg##r = (bit<8>)(meta.h##r >> 31);
#define TNA_CELL_OF_JOB(r) meta.bucket##r = meta.bucket##r + meta.sketch_base;
#define TNA_CELL_TO_BRIDGE(r) hdr.bridge.cell##r = meta.bucket##r;
    HINA_FOR_EACH_ROW(TNA_HASH_STEPS)
    action first_keys() { HINA_FOR_EACH_ROW(TNA_FIRST_KEY) }
    action signs() { HINA_FOR_EACH_ROW(TNA_SIGN) }
    action cells_of_job() { HINA_FOR_EACH_ROW(TNA_CELL_OF_JOB) }
    action bridge_cells() { HINA_FOR_EACH_ROW(TNA_CELL_TO_BRIDGE) }

#define TNA_SECOND_KEY_APPLY(r) second_key_##r();
#define TNA_BUCKET_APPLY(r) bucket_##r();
#define TNA_SECOND_HASH_APPLY(r) second_hash_##r();

    apply {
        first_keys();
        HINA_FOR_EACH_ROW(TNA_SECOND_KEY_APPLY)
        HINA_FOR_EACH_ROW(TNA_BUCKET_APPLY)
        HINA_FOR_EACH_ROW(TNA_SECOND_HASH_APPLY)
        signs();
        cells_of_job();
        bridge_cells();
    }
}

// The rows' updates: one RegisterAction per row, add or subtract chosen inside it by the cell's
// sign (the stateful ALU's condition on a PHV input), so a row is one table. Two RegisterActions
// (add, sub) picked by an `if` made each row a gateway and two tables; Tofino 2's compiler found
// no split format for them ("Couldn't find a usable split format for table tbl_tna_sketch...").
control TnaSketchRows(inout tna_headers_t hdr) {

#define TNA_SKETCH_ROW(r) \
    Register<bit<32>, bit<32>>(HINA_SKETCH_CAPACITY) sketch_row_##r; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(sketch_row_##r) sketch_update_##r = { \
        void apply(inout bit<32> value) { \
            if (hdr.bridge.neg##r == 1) { \
                value = value - hdr.bridge.pair_value; \
            } else { \
                value = value + hdr.bridge.pair_value; \
            } \
        } \
    };
    HINA_FOR_EACH_ROW(TNA_SKETCH_ROW)

#define TNA_SKETCH_ROW_APPLY(r) sketch_update_##r.execute(hdr.bridge.cell##r);

    apply {
        HINA_FOR_EACH_ROW(TNA_SKETCH_ROW_APPLY)
    }
}

#endif  // _HINA_TNA_SKETCH_P4_
