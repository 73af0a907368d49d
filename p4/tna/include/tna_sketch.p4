// In-switch count sketch on TNA. Same hash as p4/include/sketch.p4 and hina/hashing.py, bit for
// bit: for row r, h = F_r(F_r(index)) with F_r(x) = crc32(be32(seed_r) ++ be32(x + off_r)),
// bucket = h & mask, sign = -1 iff h[31:31]. TNA's CRC32 (HashAlgorithm_t.CRC32: reflected
// 0x04C11DB7, init and final xor 0xFFFFFFFF) is zlib's, over the fields in order, big-endian, as
// BMv2's crc32 is. seed_r and off_r = seed_r * 0x9E3779B1 come from job_config (tna_admission).
//
// A row register can be updated once per pass, so a PAIRS packet takes HINA_PAIRS passes: pass p
// adds pair p (the parser and deparser rotate the pairs, see tna_parser.p4) to every row, each
// row its own register. The stream's sequence check (pair_generation, pair_next_seq) runs in
// pass 0 only. HARVEST and RESET read or zero HINA_WORDS counters of one row, W passes on Tofino:
// the TNA program leaves them to the control plane (register reads and writes).
#ifndef _HINA_TNA_SKETCH_P4_
#define _HINA_TNA_SKETCH_P4_

#include "tna_headers.p4"

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
    RegisterAction<bit<32>, bit<32>, bit<32>>(pair_next_seq) restart_stream = {
        void apply(inout bit<32> value) {
            if (hdr.hina.seq == 0) {
                value = 1;
            } else {
                value = 0;
            }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(pair_next_seq) check_pair_seq = {
        void apply(inout bit<32> value, out bit<32> next) {
            next = value;
            if (value == hdr.hina.seq) {
                value = value + 1;
            }
        }
    };

    action compare_seq() {
        meta.pair_diff = hdr.hina.seq - meta.stream_next;
    }
    action sign_of_diff() {
        meta.pair_older = meta.pair_diff[31:31];
    }

    apply {
        meta.stored_generation = claim_stream.execute(meta.pair_stream);
        if (meta.stored_generation != meta.generation) {
            restart_stream.execute(meta.pair_stream);
            meta.stream_next = 0;
        } else {
            meta.stream_next = check_pair_seq.execute(meta.pair_stream);
        }
        compare_seq();
        sign_of_diff();
    }
}

control TnaSketchRows(inout tna_headers_t hdr, inout tna_ingress_metadata_t meta) {

// Row r: its counters (all jobs), the two CRC passes, and add / subtract.
#define TNA_SKETCH_ROW(r) \
    Register<bit<32>, bit<32>>(HINA_SKETCH_CAPACITY) sketch_row_##r; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(sketch_row_##r) sketch_add_##r = { \
        void apply(inout bit<32> value) { value = value + hdr.pair.value; } \
    }; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(sketch_row_##r) sketch_sub_##r = { \
        void apply(inout bit<32> value) { value = value - hdr.pair.value; } \
    }; \
    Hash<bit<32>>(HashAlgorithm_t.CRC32) first_pass_##r; \
    Hash<bit<32>>(HashAlgorithm_t.CRC32) second_pass_##r; \
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) cell_##r;
    HINA_FOR_EACH_ROW(TNA_SKETCH_ROW)

// The hash chain of row r, one dependent step per action (each its own stage).
#define TNA_SKETCH_ROW_STEPS(r) \
    action first_key_##r() { meta.key##r = hdr.pair.index + meta.row_offset##r; } \
    action first_hash_##r() { meta.h1_##r = first_pass_##r.get({meta.seed##r, meta.key##r}); } \
    action second_key_##r() { meta.key##r = meta.h1_##r + meta.row_offset##r; } \
    action second_hash_##r() { meta.h##r = second_pass_##r.get({meta.seed##r, meta.key##r}); } \
    action bucket_##r() { meta.cell##r = meta.h##r & meta.sketch_mask; meta.neg##r = meta.h##r[31:31]; } \
    action cell_##r##_of_job() { meta.cell##r = meta.cell##r + meta.sketch_base; } \
    action cell_##r##_index() { meta.cell_index##r = cell_##r.get({meta.cell##r}); }
    HINA_FOR_EACH_ROW(TNA_SKETCH_ROW_STEPS)

#define TNA_SKETCH_ROW_APPLY(r) \
    first_key_##r(); \
    first_hash_##r(); \
    second_key_##r(); \
    second_hash_##r(); \
    bucket_##r(); \
    cell_##r##_of_job(); \
    cell_##r##_index(); \
    if (meta.neg##r == 1) { \
        sketch_sub_##r.execute(meta.cell_index##r); \
    } else { \
        sketch_add_##r.execute(meta.cell_index##r); \
    }

    apply {
        // value 0 is padding: nothing to add.
        if (hdr.pair.value != 0) {
            HINA_FOR_EACH_ROW(TNA_SKETCH_ROW_APPLY)
        }
    }
}

#endif  // _HINA_TNA_SKETCH_P4_
