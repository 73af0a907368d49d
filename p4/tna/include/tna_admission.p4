// Validation and admission on TNA: the same checks and the same tables (names, keys, action
// parameters) as p4/include/admission.p4, except what Tofino computes differently:
//   * set_job also carries each sketch row's seed_r and row offset seed_r * 0x9E3779B1 (a
//     Tofino stage cannot multiply two run-time values), written by the controller;
//   * admit_worker carries all_workers (the bitmap of every worker of the job): a slot copy is
//     complete when its bitmap reaches it (no count register); and the job's first slot three
//     ways, slot_base, copy_base = 2 * slot_base, lane_base = 4 * slot_base (register indices are
//     formed by XOR in the hash unit, tna_slot_state.p4);
//   * worker_admission's key includes the packet's generation, and worker_generation (the key
//     without it) names a stale sender, so that every admission outcome is known in stage 0;
//   * slot_range (job_id, slot range) checks slot < n_slots: a gateway cannot compare two
//     run-time fields.
#ifndef _HINA_TNA_ADMISSION_P4_
#define _HINA_TNA_ADMISSION_P4_

#include "tna_headers.p4"

// Validation as one ternary table (one stage; a chain of gateways took two): a worker-to-switch
// message of a known type and op, with its payload parsed, zero reserved bits, and a UDP length
// that is exactly the message's size (no trailing bytes leak into results); v3's checksum must
// be present and right (the parser's udp_err: tna_parser.p4). A well-formed message with a wrong
// checksum is BAD_CHECKSUM, as is any with none; anything else is MALFORMED (the v1model
// program's order: its Validate, then VerifyUdpChecksum).
control TnaValidate(inout tna_headers_t hdr,
                    inout tna_ingress_metadata_t meta,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {

    action well_formed() {}
    action bad_checksum() {
        meta.verdict = VERDICT_BAD_CHECKSUM;
    }
    action malformed() {
        meta.verdict = VERDICT_MALFORMED;
    }

// Each message shape twice: with the right checksum (well_formed), then with a wrong one
// (bad_checksum). The keys: parser error, version, type, op, reserved, which payload headers
// the parser filled (words_a, thc_a, pair), UDP length, UDP checksum, udp_err.
#define TNA_MESSAGE(type, op, words, thc, pair, length) \
    (0, HINA_VERSION, type, op, 0, words, thc, pair, length, _, false) : well_formed(); \
    (0, HINA_VERSION, type, op, 0, words, thc, pair, length, _, true) : bad_checksum();
#define TNA_AGGREGATE_WORDS(op) \
    TNA_MESSAGE(MSG_AGGREGATE, op, true, false, false, UDP_BYTES + HINA_HEADER_BYTES + 4 * TNA_WORDS)
    table message_check {
        key = {
            ig_prsr_md.parser_err: ternary;
            hdr.hina.version:      ternary;
            hdr.hina.msg_type:     ternary;
            hdr.hina.op:           ternary;
            hdr.hina.reserved:     ternary;
            hdr.words_a.isValid(): ternary;
            hdr.thc_a.isValid():   ternary;
            hdr.pair.isValid():    ternary;
            hdr.udp.length:        ternary;
            hdr.udp.checksum:      ternary;
            meta.udp_err:          ternary;
        }
        actions = {
            well_formed;
            bad_checksum;
            malformed;
        }
        const entries = {
            (0, HINA_VERSION, _, _, 0, _, _, _, _, UDP_NO_CHECKSUM, _) : bad_checksum();
            TNA_AGGREGATE_WORDS(OP_SUM)
            TNA_AGGREGATE_WORDS(OP_MAX)
            TNA_AGGREGATE_WORDS(OP_OR)
            TNA_MESSAGE(MSG_AGGREGATE, OP_LUT_SUM, false, true, false,
                        UDP_BYTES + HINA_HEADER_BYTES + TNA_WORDS)
            TNA_MESSAGE(MSG_PAIRS, _, false, false, true,
                        UDP_BYTES + HINA_HEADER_BYTES + HINA_PAIR_BYTES * HINA_PAIRS)
#if TNA_BLOCK_SPARSE
            // Block-sparse: the block header and the lanes (BLOCK_SUM), or the header alone
            // (BLOCK_SKIP: a SKIP with lanes, or a BLOCK_SUM without, is MALFORMED).
            TNA_MESSAGE(MSG_AGGREGATE, OP_BLOCK_SUM, true, false, false,
                        UDP_BYTES + HINA_HEADER_BYTES + HINA_BLOCK_BYTES + 4 * TNA_WORDS)
            TNA_MESSAGE(MSG_AGGREGATE, OP_BLOCK_SKIP, false, false, false,
                        UDP_BYTES + HINA_HEADER_BYTES + HINA_BLOCK_BYTES)
        }
        size = 15;
#else
        }
        size = 11;
#endif
        const default_action = malformed();
    }

#if TNA_BLOCK_SPARSE
    // The next nonzero block must lie beyond this one: next |-| block (unsigned, saturating) is
    // 0 when it does not. A ternary key cannot compare two fields; this is one instruction in
    // the same stage, and the slot state's gate (stage 1) tests it (hina_tna.p4).
    action block_gap() {
        meta.block_gap = hdr.block.next |-| hdr.block.block;
    }
#endif

    apply {
        message_check.apply();
#if TNA_BLOCK_SPARSE
        if (hdr.block.isValid()) {
            block_gap();
        }
#endif
        if (meta.ipv4_err) {
            meta.ipv4_bad = 1;
        }
    }
}

control TnaAdmission(inout tna_headers_t hdr,
                     inout tna_ingress_metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md) {

#define TNA_SEED_PARAMS(r) , bit<32> seed##r, bit<32> row_offset##r
#define TNA_SEED_SET(r) meta.seed##r = seed##r; meta.row_offset##r = row_offset##r;
    // Parameters as admission.p4's set_job, plus seed_r = sketch_seed + r and
    // row_offset_r = seed_r * 0x9E3779B1 (mod 2^32) for each row r (hina/hashing.py).
    action set_job(bit<16> n_slots, bit<8> lut_id, bit<32> sketch_base, bit<32> sketch_mask
                   HINA_FOR_EACH_ROW(TNA_SEED_PARAMS)) {
        meta.n_slots = n_slots;
        meta.lut_id = lut_id;
        meta.sketch_base = sketch_base;
        meta.sketch_mask = sketch_mask;
        HINA_FOR_EACH_ROW(TNA_SEED_SET)
    }

    action reject_job() {
        meta.job_miss = 1;
    }

    table job_config {
        key = {
            hdr.hina.job_id: exact @name("job_id");
        }
        actions = {
            set_job;
            @defaultonly reject_job;
        }
        size = HINA_JOB_TABLE_SIZE;
        default_action = reject_job();
    }

    // reg_base comes three times, as slot_base, copy_base = 2 * reg_base and lane_base =
    // 4 * reg_base: the register indices are formed by the hash unit (XOR), which cannot shift.
    action admit_worker(bit<8> worker_id, bit<32> worker_bit, bit<32> all_workers,
                        bit<8> n_workers, bit<16> mcast_grp, bit<32> slot_base,
                        bit<32> copy_base, bit<32> lane_base, bit<32> pair_stream,
                        bit<16> generation) {
        meta.worker_id = worker_id;
        meta.worker_bit = worker_bit;
        meta.all_workers = all_workers;
        meta.n_workers = n_workers;
        meta.mcast_grp = mcast_grp;
        meta.slot_base = slot_base;
        meta.copy_base = copy_base;
        meta.lane_base = lane_base;
        meta.pair_stream = pair_stream;
        meta.generation = generation;
    }

    action reject_worker() {
        meta.worker_miss = 1;
    }

    // Keyed on where the frame came from as well as what it says (admission.p4 explains why).
    table worker_admission {
        key = {
            hdr.hina.job_id:        exact @name("job_id");
            ig_intr_md.ingress_port: exact @name("ingress_port");
            hdr.ethernet.src_addr:  exact @name("src_mac");
            hdr.ipv4.src_addr:      exact @name("src_addr");
            hdr.udp.src_port:       exact @name("src_port");
            // The job's current generation (admission.p4 compares it after the lookup; here it
            // is part of the key so that the slot state's gate is one gateway in stage 1).
            hdr.hina.generation:    exact @name("generation");
        }
        actions = {
            admit_worker;
            @defaultonly reject_worker;
        }
        size = HINA_ADMISSION_SIZE;
        default_action = reject_worker();
    }

    action bad_slot() {
        meta.slot_miss = 1;
    }

    // Written by the controller: one entry per job, slot range [0, n_slots - 1]. A gateway cannot
    // compare two run-time fields (slot < n_slots), a range match can.
    table slot_range {
        key = {
            hdr.hina.job_id: exact @name("job_id");
            hdr.hina.slot:   range @name("slot");
        }
        actions = {
            NoAction;
            @defaultonly bad_slot;
        }
        size = HINA_JOB_TABLE_SIZE;
        default_action = bad_slot();
    }

    apply {
        // Every pass needs the job's settings (the sketch seeds, the LUT id). Only the packet
        // from the wire is admitted: a recirculated one arrives on the recirculation port, which
        // no frame from outside can. The three lookups are independent (one stage); their
        // outcomes are combined into meta.reason by TnaReason, off the lanes' critical path.
        job_config.apply();
        if (meta.recirculated == 0) {
            worker_admission.apply();
            slot_range.apply();
        }
    }
}

#if TNA_BLOCK_SPARSE
#define TNA_BLOCK_GAP_BAD || meta.block_gap == 0
#else
#define TNA_BLOCK_GAP_BAD
#endif

// The drop reason, by precedence as in p4/hina.p4. Slot state and lanes do not wait for it:
// they are gated on the raw outcomes (hina_tna.p4).
control TnaReason(inout tna_headers_t hdr,
                  inout tna_ingress_metadata_t meta,
                  in ingress_intrinsic_metadata_t ig_intr_md) {

    action flag_wrong_port() {
        meta.reason = REASON_WRONG_PORT;
    }

    // Written by the controller: one entry per worker of each job, keyed by the addresses alone.
    // Only names the reason of a drop (as admission.p4's).
    table worker_by_address {
        key = {
            hdr.hina.job_id:   exact @name("job_id");
            hdr.ipv4.src_addr: exact @name("src_addr");
            hdr.udp.src_port:  exact @name("src_port");
        }
        actions = {
            flag_wrong_port;
            @defaultonly NoAction;
        }
        size = HINA_ADMISSION_SIZE;
        default_action = NoAction();
    }

    // An admitted sender of another generation: the job's current one, for the NOTICE.
    action stale_generation(bit<16> generation) {
        meta.generation = generation;
        meta.reason = REASON_STALE_GENERATION;
        meta.reply = REPLY_NOTICE;
    }

    // Not a worker of the job at all (the miss of worker_generation).
    action unknown_worker() {
        meta.reason = REASON_UNKNOWN_WORKER;
    }

    // Written by the controller: one entry per worker of each job, worker_admission's key
    // without the generation; its parameter is the job's current generation (MODIFY on restart).
    table worker_generation {
        key = {
            hdr.hina.job_id:         exact @name("job_id");
            ig_intr_md.ingress_port: exact @name("ingress_port");
            hdr.ethernet.src_addr:   exact @name("src_mac");
            hdr.ipv4.src_addr:       exact @name("src_addr");
            hdr.udp.src_port:        exact @name("src_port");
        }
        actions = {
            stale_generation;
            @defaultonly unknown_worker;
        }
        size = HINA_ADMISSION_SIZE;
        default_action = unknown_worker();
    }

    apply {
        if (meta.verdict == VERDICT_MALFORMED || meta.ipv4_bad == 1 TNA_BLOCK_GAP_BAD) {
            meta.reason = REASON_MALFORMED;
        } else if (meta.verdict == VERDICT_BAD_CHECKSUM) {
            meta.reason = REASON_BAD_CHECKSUM;
        } else if (meta.job_miss == 1) {
            meta.reason = REASON_BAD_JOB;
        } else if (meta.worker_miss == 1) {
            // The miss names the sender unknown in the lookup's own stage, and
            // worker_by_address refines it in the next (one stage less than a gateway between).
            if (!worker_generation.apply().hit) {
                worker_by_address.apply();
            }
        } else if (meta.slot_miss == 1 && hdr.hina.msg_type == MSG_AGGREGATE) {
            meta.reason = REASON_BAD_SLOT;
        }
    }
}

#endif  // _HINA_TNA_ADMISSION_P4_
