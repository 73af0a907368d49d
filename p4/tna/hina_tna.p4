/* HINA: Homomorphic In-Network Aggregation, TNA (Tofino) dataplane.
 *
 * The wire format, admission, slot pool with two copies per slot, and the lane operations of
 * the v1model program (p4/hina.p4): SUM, LUT-SUM (THC, table lookup in the switch), MAX, OR,
 * and the in-switch count sketch with Tofino Hash externs. Headers and constants are the v1model
 * program's own (p4/include/types.p4, config.p4, headers.p4); p4/tna/include/ holds what TNA
 * does differently. Design, resources, what a pass costs: docs/dataplane.md, "Tofino (TNA)".
 *
 * A pass aggregates TNA_LANES words (one block); an AGGREGATE packet of TNA_WORDS = 2 blocks
 * takes two passes through the ingress pipeline (one recirculation), a PAIRS packet HINA_PAIRS
 * passes (one pair each). Pass 0 (from the wire): Validate -> Admission -> [THC LUT] -> SlotState
 * -> lanes on block 0; pass 1 (recirculated, hina_pass_t in front): [THC LUT] -> lanes on block 1
 * -> reply. Egress: replica rewrite and the reply's checksums.
 *
 * Build: bf-p4c -o OUT p4/tna/hina_tna.p4   (--target tofino2 --arch t2na for Tofino 2)
 * Sizes: -DTNA_LANES=1..32 (32: 64 words per packet, HINA_WORDS = 64 on the wire).
 */
#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

// The wire configuration this program serves (p4/include/config.p4 checks it).
#ifndef TNA_LANES
#define TNA_LANES 32
#endif
#define HINA_WORDS 64
#ifndef HINA_PAIRS
#define HINA_PAIRS 8
#endif
// Tofino memories: slot copies and sketch counters per register (SRAM: 4 B each).
#ifndef HINA_SLOT_CAPACITY
#define HINA_SLOT_CAPACITY 4096
#endif
#ifndef HINA_SKETCH_CAPACITY
#define HINA_SKETCH_CAPACITY 65536
#endif

#include "include/tna_headers.p4"
#include "include/tna_parser.p4"
#include "include/tna_admission.p4"
#include "include/tna_slot_state.p4"
#include "include/tna_lanes.p4"
#include "include/tna_sketch.p4"

control HinaTnaIngress(inout tna_headers_t hdr,
                       inout tna_ingress_metadata_t meta,
                       in ingress_intrinsic_metadata_t ig_intr_md,
                       in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                       inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                       inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    // Packets per REASON_* (as p4/hina.p4); read by the controller.
    Counter<bit<32>, bit<8>>(HINA_REASONS, CounterType_t.PACKETS) reason_counter;
    // Packets and bytes admitted per job id (pass 0 only).
    Counter<bit<32>, bit<16>>(HINA_MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_counter;

    TnaValidate() validate;
    TnaAdmission() admission;
    TnaThcLut() thc_lut;
    TnaSlotState() slot_state;
    TnaLanes() lanes;
    TnaPairStream() pair_stream;
    TnaSketchRows() sketch_rows;

    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) block_index;

    // Send the packet round again for its next pass.
    action recirculate() {
        hdr.pass.setValid();
        hdr.pass.pass = meta.pass + 1;
        hdr.pass.lane_op = meta.lane_op;
        hdr.pass.reply = meta.reply;
        hdr.pass.lane_base = meta.reg_index;
        hdr.bridge.setValid();
        hdr.bridge.reply = REPLY_RECIRCULATE;
        ig_tm_md.ucast_egress_port = TNA_RECIRC_PORT;
    }

    apply {
        if (hdr.hina.isValid()) {
            if (meta.pass == 0) {
                validate.apply(hdr, meta, ig_prsr_md);
            } else {
                // What pass 0 decided.
                meta.lane_op = hdr.pass.lane_op;
                meta.reply = hdr.pass.reply;
                meta.reg_index = hdr.pass.lane_base;
            }
            if (meta.reason == REASON_NONE) {
                admission.apply(hdr, meta, ig_intr_md);
            }
            if (meta.pass == 0 && meta.reason == REASON_NONE) {
                job_counter.count(hdr.hina.job_id);
                // The pass header's fields for later passes and the reply.
                hdr.pass.count = meta.n_workers;
                hdr.pass.mcast_grp = meta.mcast_grp;
                hdr.pass.generation = meta.generation;
                hdr.pass.port = ig_intr_md.ingress_port;
            }
            if (meta.reason == REASON_NONE && hdr.hina.msg_type == MSG_AGGREGATE) {
                if (hdr.thc_a.isValid()) {
                    thc_lut.apply(hdr, meta);
                }
                if (meta.pass == 0 && meta.reason == REASON_NONE) {
                    slot_state.apply(hdr, meta);   // the slot is in range (slot_range)
                }
                if (meta.reason == REASON_NONE && meta.lane_op != LANE_NONE) {
                    meta.lane_index = block_index.get({meta.reg_index[30:0], meta.pass[0:0]});
                    lanes.apply(hdr, meta);
                    if (meta.pass < TNA_BLOCKS - 1) {
                        recirculate();
                    }
                }
            } else if (meta.reason == REASON_NONE && hdr.hina.msg_type == MSG_PAIRS) {
                if (meta.sketch_mask == 0) {
                    meta.reason = REASON_BAD_JOB;      // the job has no in-switch sketch
                } else {
                    if (meta.pass != 0) {
                        meta.pair_add = 1;
                    } else {
                        pair_stream.apply(hdr, meta);
                        if (meta.pair_diff == 0) {
                            meta.pair_add = 1;
                        } else if (meta.pair_older == 1) {
                            meta.reply = REPLY_UNICAST;   // applied before: acknowledge only
                        } else {
                            meta.reason = REASON_OUT_OF_ORDER;
                        }
                    }
                    if (meta.pair_add == 1) {
                        sketch_rows.apply(hdr, meta);
                        if (meta.pass < HINA_PAIRS - 1) {
                            recirculate();
                        } else {
                            meta.reply = REPLY_UNICAST;
                        }
                    }
                }
            }
            if (meta.reason != REASON_NONE) {
                reason_counter.count(meta.reason);
            }
        } else if (hdr.udp.isValid()) {
            // To a HINA port without a whole HINA header.
            reason_counter.count(REASON_MALFORMED);
        }

        if (hdr.bridge.isValid()) {
            // Recirculated: pass header and payload go round as they are.
        } else if (meta.reply == REPLY_NONE || meta.reason != REASON_NONE
                   && meta.reply != REPLY_NOTICE) {
            ig_dprsr_md.drop_ctl = 1;
        } else {
            // The last pass: the reply (as p4/include/egress_rewrite.p4's Reply).
            bit<16> payload = 0;
            if (meta.reply == REPLY_NOTICE) {
                hdr.hina.msg_type = MSG_NOTICE;
                hdr.hina.op = meta.reason;
                hdr.hina.flags = 0;
                hdr.hina.count = 0;
                hdr.hina.generation = meta.generation;
                hdr.words_a.setInvalid();
                hdr.words_b.setInvalid();
                hdr.thc_a.setInvalid();
                hdr.thc_b.setInvalid();
                hdr.pair.setInvalid();
                hdr.pair_rest.setInvalid();
            } else if (hdr.hina.msg_type == MSG_AGGREGATE) {
                hdr.hina.msg_type = MSG_RESULT;
                if (meta.reply == REPLY_UNICAST) {
                    hdr.hina.flags = FLAG_RETRANSMIT;
                } else {
                    hdr.hina.flags = 0;
                }
                hdr.hina.count = hdr.pass.count;
                payload = 4 * TNA_WORDS;
            } else {
                hdr.hina.msg_type = MSG_PAIRS_ACK;
                hdr.hina.flags = 0;
                hdr.pair.setInvalid();
                hdr.pair_rest.setInvalid();
            }
            hdr.udp.length = UDP_BYTES + HINA_HEADER_BYTES + payload;
            hdr.ipv4.total_len = IPV4_BYTES + UDP_BYTES + HINA_HEADER_BYTES + payload;
            hdr.udp.checksum = 0;
            hdr.bridge.setValid();
            hdr.bridge.reply = meta.reply;
            if (meta.reply == REPLY_MULTICAST) {
                hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
                hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
                hdr.udp.src_port = hdr.udp.dst_port;
                ig_tm_md.mcast_grp_a = hdr.pass.mcast_grp;
            } else {
                mac_addr_t mac = hdr.ethernet.dst_addr;
                hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
                hdr.ethernet.src_addr = mac;
                ipv4_addr_t ip = hdr.ipv4.dst_addr;
                hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
                hdr.ipv4.src_addr = ip;
                bit<16> port = hdr.udp.dst_port;
                hdr.udp.dst_port = hdr.udp.src_port;
                hdr.udp.src_port = port;
                ig_tm_md.ucast_egress_port = hdr.pass.port;
            }
            hdr.pass.setInvalid();
        }
    }
}

control HinaTnaEgress(inout tna_headers_t hdr,
                      inout tna_egress_metadata_t meta,
                      in egress_intrinsic_metadata_t eg_intr_md,
                      in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                      inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                      inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    // Parameters: the worker's MAC, IPv4 address and UDP port (as egress_rewrite.p4).
    action set_worker_address(mac_addr_t dst_mac, ipv4_addr_t dst_addr, bit<16> dst_port) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.dst_port = dst_port;
    }

    action drop_replica() {
        eg_dprsr_md.drop_ctl = 1;
    }

    // Written by the controller: rid = job_id * 64 + worker_id + 1 -> the worker's addresses.
    table replica_rewrite {
        key = {
            eg_intr_md.egress_rid: exact @name("egress_rid");
        }
        actions = {
            set_worker_address;
            @defaultonly drop_replica;
        }
        size = HINA_REPLICA_TABLE_SIZE;
        default_action = drop_replica();
    }

    apply {
        if (hdr.bridge.reply != REPLY_RECIRCULATE) {
            if (eg_intr_md.egress_rid != 0) {
                replica_rewrite.apply();
            }
            // The deparser's UDP checksum adds the payload's sum back (ones' complement).
            meta.payload_sum = ~hdr.bridge.payload_sum;
        }
        hdr.bridge.setInvalid();
    }
}

Pipeline(HinaTnaIngressParser(),
         HinaTnaIngress(),
         HinaTnaIngressDeparser(),
         HinaTnaEgressParser(),
         HinaTnaEgress(),
         HinaTnaEgressDeparser()) pipe;

Switch(pipe) main;
