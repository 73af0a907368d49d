/* HINA: Homomorphic In-Network Aggregation, v1model dataplane.
 *
 * One program serves every mode: slot aggregation with the lane operations SUM (32-bit fixed
 * point, overflow flagged), LUT-SUM (THC), MAX and OR -- dense count sketches are SUM counters
 * plus OR bitmaps -- block-sparse SUM (BLOCK_SUM / BLOCK_SKIP: rounds of one block per slot,
 * the next block announced by the workers), and the in-switch count sketch (PAIRS, HARVEST,
 * RESET).
 *
 * Pipeline (one control per stage, p4/include/):
 *   parser -> Validate -> VerifyUdpChecksum -> Admission -> [AGGREGATE: ThcLut (LUT_SUM
 *   only) -> SlotState -> [BlockSkip] -> LaneAlu -> SlotFlags | PAIRS, HARVEST, RESET: SketchUpdate] -> Reply
 *   egress: ReplicaRewrite for multicast replicas, UpdateUdpChecksum for every reply.
 * Design and register layout: docs/dataplane.md; wire format: docs/protocol.md.
 */
#define V1MODEL_VERSION 20200408
#include <core.p4>
#include <v1model.p4>

#include "include/config.p4"
#include "include/types.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/admission.p4"
#include "include/udp_checksum.p4"
#include "include/lut.p4"
#include "include/slot_state.p4"
#include "include/lane_alu.p4"
#include "include/block_sparse.p4"
#include "include/sketch.p4"
#include "include/egress_rewrite.p4"

control HinaIngress(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {

    // Packets per REASON_*: drops by cause, plus flagged overflows and absorbed duplicates.
    // Written by this control; read by the controller (P4Runtime CounterEntry).
    counter<bit<32>>(HINA_REASONS, CounterType.packets) reason_counter;
    // Packets and bytes admitted per job id (what the job's workers sent, retransmissions
    // included). Written by this control; read by the controller (P4Runtime CounterEntry).
    counter<bit<32>>(HINA_MAX_JOBS, CounterType.packets_and_bytes) job_counter;

    Validate() validate;
    VerifyUdpChecksum() verify_udp_checksum;
    Admission() admission;
    ThcLut() thc_lut;
    SlotState() slot_state;
    LaneAlu() lane_alu;
    SlotFlags() slot_flags;
    BlockSkip() block_skip;
    SketchUpdate() sketch_update;
    Reply() reply;

    // Choose the lane operation for a new contribution.
    action set_alu_mode(bit<8> mode, bit<1> check_overflow) {
        meta.alu_mode = mode;
        meta.check_overflow = check_overflow;
    }

    apply {
        if (hdr.hina.isValid()) {
            validate.apply(hdr, meta, standard_metadata);
            if (meta.reason == REASON_NONE) {
                verify_udp_checksum.apply(hdr, meta);
            }
            if (meta.reason == REASON_NONE) {
                admission.apply(hdr, meta, standard_metadata);
            }
            if (meta.reason == REASON_NONE) {
                if (hdr.hina.job_id < HINA_MAX_JOBS) {   // admission only knows ids below it
                    job_counter.count((bit<32>)hdr.hina.job_id);
                }
                if (hdr.hina.msg_type == MSG_AGGREGATE) {
                    if (hdr.hina.op == OP_LUT_SUM) {
                        thc_lut.apply(hdr, meta);
                    }
                    if (meta.reason == REASON_NONE) {
                        slot_state.apply(hdr, meta);
                    }
                    if (meta.reason == REASON_NONE && hdr.hina.op == OP_BLOCK_SKIP) {
                        block_skip.apply(hdr, meta);
                    }
                    if (meta.reason == REASON_NONE) {
                        bool complete = meta.count == meta.n_workers;
                        if (meta.contribute == 1) {
                            // First contribution to a new use overwrites the old result.
                            meta.keep_mask = (meta.new_round == 1) ? 32w0 : 32w0xFFFFFFFF;
                            if (hdr.hina.op == OP_SUM || hdr.hina.op == OP_BLOCK_SUM
                                    || hdr.hina.op == OP_BLOCK_SKIP) {
                                set_alu_mode(ALU_SUM, 1);
                            } else if (hdr.hina.op == OP_LUT_SUM) {
                                set_alu_mode(ALU_ADD16X2, 0);
                            } else if (hdr.hina.op == OP_MAX) {
                                set_alu_mode(ALU_MAX, 0);
                            } else {
                                set_alu_mode(ALU_OR, 0);
                            }
                        } else if (complete) {
                            // A worker lost the result: read the stored one back for it.
                            meta.keep_mask = 32w0xFFFFFFFF;
                            set_alu_mode(ALU_READ, 0);
                        } else {
                            // Retransmission into a slot still filling: already counted.
                            meta.reason = REASON_DUPLICATE;
                        }
                        // One application of the lanes and the flags per packet (Tofino: each
                        // register once per pass).
                        if (meta.contribute == 1 || complete) {
                            lane_alu.apply(hdr, meta);
                            slot_flags.apply(hdr, meta);
                            if (meta.lane_overflow == 1) {
                                meta.reason = REASON_OVERFLOW;
                            }
                            if (complete) {
                                meta.reply = (meta.contribute == 1) ? (bit<2>)REPLY_MULTICAST
                                                                    : (bit<2>)REPLY_UNICAST;
                            }
                        }
                    }
                } else {
                    sketch_update.apply(hdr, meta);
                }
            }
            if (meta.reason != REASON_NONE) {
                reason_counter.count((bit<32>)meta.reason);
            }
        } else if (hdr.udp.isValid()
                   && (hdr.udp.dst_port & HINA_UDP_PORT_MASK) == HINA_UDP_PORT_BASE) {
            // To a HINA port but no whole HINA header: the frame ended inside it (the parser
            // stopped with PacketTooShort). Counted, so that no malformed frame goes unseen.
            reason_counter.count((bit<32>)REASON_MALFORMED);
        }
        // Anything that is not HINA is dropped: this switch only aggregates.
        reply.apply(hdr, meta, standard_metadata);
    }
}

control HinaEgress(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    ReplicaRewrite() replica_rewrite;
    UpdateUdpChecksum() update_udp_checksum;

    apply {
        if (standard_metadata.egress_rid != 0) {
            replica_rewrite.apply(hdr, meta, standard_metadata);
        }
        // Only replies reach egress (ingress drops everything else).
        update_udp_checksum.apply(hdr);
    }
}

V1Switch(
    HinaParser(),
    HinaVerifyChecksum(),
    HinaIngress(),
    HinaEgress(),
    HinaComputeChecksum(),
    HinaDeparser()
) main;
