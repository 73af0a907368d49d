// Validation and admission on TNA: the same checks and the same tables (names, keys, action
// parameters) as p4/include/admission.p4, except what Tofino computes differently:
//   * set_job also carries each sketch row's seed_r and row offset seed_r * 0x9E3779B1 (a
//     Tofino stage cannot multiply two run-time values), written by the controller;
//   * admit_worker carries all_workers (the bitmap of every worker of the job) instead of
//     n_workers alone: a slot copy is complete when its bitmap reaches it (no count register).
#ifndef _HINA_TNA_ADMISSION_P4_
#define _HINA_TNA_ADMISSION_P4_

#include "tna_headers.p4"

control TnaValidate(inout tna_headers_t hdr,
                    inout tna_ingress_metadata_t meta,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {
    apply {
        bit<16> expected = 0;
        if (hdr.hina.msg_type == MSG_AGGREGATE) {
            if (hdr.thc_a.isValid()) {
                expected = UDP_BYTES + HINA_HEADER_BYTES + TNA_WORDS;
            } else if (hdr.words_a.isValid()) {
                expected = UDP_BYTES + HINA_HEADER_BYTES + 4 * TNA_WORDS;
            }
        } else if (hdr.hina.msg_type == MSG_PAIRS) {
            if (hdr.pair_rest.isValid()) {
                expected = UDP_BYTES + HINA_HEADER_BYTES + HINA_PAIR_BYTES * HINA_PAIRS;
            }
        }
        // One test per gateway: a Tofino gateway compares at most 4 bytes + 12 bits of PHV.
        if (ig_prsr_md.parser_err != 0) {
            meta.reason = REASON_MALFORMED;
        } else if (!meta.ipv4_ok) {
            meta.reason = REASON_MALFORMED;
        } else if (hdr.hina.version != HINA_VERSION) {
            meta.reason = REASON_MALFORMED;
        } else if (hdr.hina.reserved != 0) {
            meta.reason = REASON_MALFORMED;
        } else if (expected == 0) {
            meta.reason = REASON_MALFORMED;
        } else if (hdr.udp.length != expected) {
            meta.reason = REASON_MALFORMED;
        } else if (hdr.udp.checksum == UDP_NO_CHECKSUM) {
            meta.reason = REASON_BAD_CHECKSUM;   // v3: mandatory (the sum itself: see parser)
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
        meta.reason = REASON_BAD_JOB;
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

    action admit_worker(bit<32> worker_bit, bit<32> all_workers, bit<8> n_workers,
                        bit<16> mcast_grp, bit<32> reg_base, bit<32> pair_stream,
                        bit<16> generation) {
        meta.worker_bit = worker_bit;
        meta.all_workers = all_workers;
        meta.n_workers = n_workers;
        meta.mcast_grp = mcast_grp;
        meta.reg_base = reg_base;
        meta.pair_stream = pair_stream;
        meta.generation = generation;
    }

    action reject_worker() {
        meta.reason = REASON_UNKNOWN_WORKER;
    }

    // Keyed on where the frame came from as well as what it says (admission.p4 explains why).
    table worker_admission {
        key = {
            hdr.hina.job_id:        exact @name("job_id");
            ig_intr_md.ingress_port: exact @name("ingress_port");
            hdr.ethernet.src_addr:  exact @name("src_mac");
            hdr.ipv4.src_addr:      exact @name("src_addr");
            hdr.udp.src_port:       exact @name("src_port");
        }
        actions = {
            admit_worker;
            @defaultonly reject_worker;
        }
        size = HINA_ADMISSION_SIZE;
        default_action = reject_worker();
    }

    action bad_slot() {
        meta.reason = REASON_BAD_SLOT;
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

    action flag_wrong_port() {
        meta.reason = REASON_WRONG_PORT;
    }

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

    apply {
        // Every pass needs the job's settings (the sketch seeds); only the packet from the wire
        // is admitted (a recirculated one arrives on the recirculation port, which no frame
        // from outside can).
        job_config.apply();
        if (meta.pass == 0 && meta.reason == REASON_NONE) {
            if (!worker_admission.apply().hit) {
                worker_by_address.apply();   // only names the drop (WRONG_PORT)
            } else if (hdr.hina.msg_type == MSG_AGGREGATE) {
                slot_range.apply();
            }
        }
        if (meta.pass == 0 && meta.reason == REASON_NONE
                && hdr.hina.generation != meta.generation) {
            meta.reason = REASON_STALE_GENERATION;
            meta.reply = REPLY_NOTICE;
        }
    }
}

#endif  // _HINA_TNA_ADMISSION_P4_
