// Packet validation and worker admission.
#ifndef _HINA_ADMISSION_P4_
#define _HINA_ADMISSION_P4_

#include "headers.p4"

// Checks what the parser cannot: a clean parse, a right IPv4 header checksum, a known type/op
// for a worker-to-switch message, zero reserved bits, a block-sparse next beyond its block, and a UDP length that is exactly the message's size (so no trailing bytes
// leak into results).
control Validate(inout headers_t hdr,
                 inout metadata_t meta,
                 in standard_metadata_t standard_metadata) {
    apply {
        bit<16> expected = 0;   // UDP length of a well-formed message, 0 = no such message
        if (hdr.hina.msg_type == MSG_AGGREGATE) {
            if (hdr.block.isValid()) {
                // Block-sparse: the next nonzero block must lie beyond this one.
                if (hdr.block.next > hdr.block.block) {
                    expected = UDP_BYTES + HINA_HEADER_BYTES + HINA_BLOCK_BYTES
                               + (hdr.words.isValid() ? 16w4 * HINA_WORDS : 16w0);
                }
            } else if (hdr.thc.isValid()) {
                expected = UDP_BYTES + HINA_HEADER_BYTES + HINA_WORDS;
            } else if (hdr.words.isValid()) {
                expected = UDP_BYTES + HINA_HEADER_BYTES + 4 * HINA_WORDS;
            }
        } else if (hdr.hina.msg_type == MSG_PAIRS) {
            if (hdr.pairs.isValid()) {
                expected = UDP_BYTES + HINA_HEADER_BYTES + HINA_PAIR_BYTES * HINA_PAIRS;
            }
        } else if (hdr.hina.msg_type == MSG_HARVEST || hdr.hina.msg_type == MSG_RESET) {
            if (hdr.harvest.isValid()) {
                expected = UDP_BYTES + HINA_HEADER_BYTES + HINA_HARVEST_BYTES;
            }
        }
        if (standard_metadata.parser_error != error.NoError
                || standard_metadata.checksum_error == 1      // IPv4 header (HinaVerifyChecksum)
                || hdr.hina.version != HINA_VERSION
                || hdr.hina.reserved != 0
                || expected == 0
                || hdr.udp.length != expected) {
            meta.reason = REASON_MALFORMED;
        }
    }
}

// Who may send what. The tables are written by the controller when a job is installed
// (hina.pipeline.job_entries); each is applied at most once per packet. An admitted sender whose
// generation is not the job's current one is dropped as STALE_GENERATION and answered with a
// header-only NOTICE (Reply) carrying the current generation: it learns at once that it is
// stale. Packets that get past admission are all of the current generation, so SlotState and
// SketchUpdate can reclaim state of any other generation (docs/protocol.md, "Generations").
control Admission(inout headers_t hdr,
                  inout metadata_t meta,
                  in standard_metadata_t standard_metadata) {

    // Job-wide settings. Parameters: n_slots - slots the job owns; lut_id - its THC table;
    // sketch_base, sketch_mask, sketch_seed - its in-switch sketch columns and hash seed.
    action set_job(bit<16> n_slots, bit<8> lut_id, bit<32> sketch_base, bit<32> sketch_mask,
                   bit<32> sketch_seed) {
        meta.n_slots = n_slots;
        meta.lut_id = lut_id;
        meta.sketch_base = sketch_base;
        meta.sketch_mask = sketch_mask;
        meta.sketch_seed = sketch_seed;
    }

    action reject_job() {
        meta.reason = REASON_BAD_JOB;
    }

    // Written by the controller: one entry per job.
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

    // Admit a worker. Parameters: worker_id - its index in the job; worker_bit - 1 << worker_id;
    // n_workers - the job's worker count; mcast_grp - the job's multicast group; reg_base - the
    // job's first slot; pair_stream - the worker's PAIRS sequence register; generation - the
    // job's current generation (the controller rewrites it, MODIFY, when the workers restart).
    action admit_worker(bit<8> worker_id, bit<32> worker_bit, bit<8> n_workers,
                        bit<16> mcast_grp, bit<32> reg_base, bit<32> pair_stream,
                        bit<16> generation) {
        meta.worker_id = worker_id;
        meta.worker_bit = worker_bit;
        meta.n_workers = n_workers;
        meta.mcast_grp = mcast_grp;
        meta.reg_base = reg_base;
        meta.pair_stream = pair_stream;
        meta.generation = generation;
    }

    action reject_worker() {
        meta.reason = REASON_UNKNOWN_WORKER;
    }

    // Written by the controller: one entry per worker of each job.
    // The key binds a worker to where it is, not only to what its headers say: any host can
    // write another worker's MAC, IPv4 address and UDP port into its frames, but it cannot
    // choose the switch port its frames arrive on. Keyed on the headers alone, a forged frame
    // was summed as the victim's contribution and corrupted the result of every worker.
    // Several workers may share a port (one host, several processes): each has its own entry.
    table worker_admission {
        key = {
            hdr.hina.job_id:                exact @name("job_id");
            standard_metadata.ingress_port: exact @name("ingress_port");
            hdr.ethernet.src_addr:          exact @name("src_mac");
            hdr.ipv4.src_addr:              exact @name("src_addr");
            hdr.udp.src_port:               exact @name("src_port");
        }
        actions = {
            admit_worker;
            @defaultonly reject_worker;
        }
        size = HINA_ADMISSION_SIZE;
        default_action = reject_worker();
    }

    // A sender that admission refused claims a worker's IPv4 address and UDP port: a forged
    // (or miswired) frame, counted apart from strangers so that operators see the attempt.
    action flag_wrong_port() {
        meta.reason = REASON_WRONG_PORT;
    }

    // Written by the controller: one entry per worker of each job, keyed by the addresses alone.
    // Only names the reason of a drop; admission never depends on it (without its entries a
    // forged frame is still dropped, as UNKNOWN_WORKER).
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
        job_config.apply();
        if (meta.reason == REASON_NONE) {
            worker_admission.apply();
            if (meta.reason == REASON_UNKNOWN_WORKER) {
                worker_by_address.apply();
            }
        }
        // Equality, not order: any other generation is not the current use (a newer one too).
        if (meta.reason == REASON_NONE && hdr.hina.generation != meta.generation) {
            meta.reason = REASON_STALE_GENERATION;
            meta.reply = REPLY_NOTICE;
        }
    }
}

#endif  // _HINA_ADMISSION_P4_
