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
 * Profiles: -DTNA_BLOCK_SPARSE=1 adds block-sparse aggregation (BLOCK_SUM / BLOCK_SKIP, protocol
 * v4: block_index in tna_slot_state.p4, one stage more before the lanes, and block_next in
 * tna_block_sparse.p4, beside the last lane; a SKIP gets zero blocks in pass 0). Without it
 * (the default) a block-sparse packet is MALFORMED. docs/dataplane.md says which TNA_LANES each
 * profile fits Tofino 1 at.
 */
#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

// Words aggregated per pass (lanes); a packet carries two blocks of them. Tofino 1: 16 (32 words
// per packet): with 32 lanes the 64 payload words, the THC and PAIRS payloads and the metadata do
// not fit its PHV (bf-p4c: "PHV allocation was not successful"). Tofino 2: 32 (64 words, the
// smallest HINA_WORDS of the v1model program). docs/dataplane.md, "Tofino (TNA)".
#ifndef TNA_LANES
#if __TARGET_TOFINO__ == 2
#define TNA_LANES 32
#else
#define TNA_LANES 16
#endif
#endif
// Block-sparse aggregation: a compile-time profile (0: not in the program).
#ifndef TNA_BLOCK_SPARSE
#define TNA_BLOCK_SPARSE 0
#endif
// headers.p4's own payload types are sized by HINA_WORDS (unused here: see tna_headers.p4).
#define HINA_WORDS 64
// Where the lanes go: from stage TNA_LANE_FIRST_STAGE, the one after slot_bitmap's (admission 0,
// slot_generation 1, slot_seq 2, slot_bitmap 3), three lane registers there (its fourth stateful
// ALU is the pair stream's) and TNA_LANES_PER_STAGE (a stage's stateful ALUs, four on Tofino 1
// and 2) in each stage after; the LUT tables by hand in stages 3-6 (tna_lanes.p4 says why:
// hash functions). Pinned with @stage (tna_lanes.p4): left to
// itself the compiler's placement puts the lanes last (each lane table is one step from the
// end of the dependency chain, so everything else goes first) and needs 15 stages of 12.
// Block-sparse puts block_index in stage 3 and slot_bitmap in 4: the lanes start in 5.
#ifndef TNA_LANE_FIRST_STAGE
#if TNA_BLOCK_SPARSE
#define TNA_LANE_FIRST_STAGE 5
#else
#define TNA_LANE_FIRST_STAGE 4
#endif
#endif
#define TNA_LANES_PER_STAGE 4
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
#if TNA_BLOCK_SPARSE
#include "include/tna_block_sparse.p4"
#endif

// Tofino 2 parses bytes no table touches into CLOTs (at most 64 bytes each) instead of PHV.
// words_b is such a block (parsed and deparsed only), and bf-p4c 9.13.4 gave its words past the
// first 64 bytes neither a CLOT nor PHV: an internal compiler error ("Emitted field didn't
// receive a PHV allocation: ingress::hdr.words_b.w16"). Those words go to PHV, the rest stay in
// a CLOT. Tofino 1 has no CLOTs.
#if __TARGET_TOFINO__ == 2
#define TNA_STRING(x) #x
#define TNA_WORD_B_IN_PHV(i) @do_not_use_clot("ingress", TNA_STRING(hdr.words_b.w##i))
TNA_FOR_EACH_LANE_PAST_64_BYTES(TNA_WORD_B_IN_PHV)
#endif
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
    TnaReason() reason;
    TnaThcLut() thc_lut;
    TnaSlotState() slot_state;
    TnaSlotOutcome() slot_outcome;
    TnaLanes() lanes;
    TnaPairStream() pair_stream;
    TnaSketchCells() sketch_cells;
#if TNA_BLOCK_SPARSE
    TnaSlotBitmap() slot_bitmap;
    TnaBlockNext() block_next;
#endif

    Hash<bit<32>>(HashAlgorithm_t.XOR32) next_block;

    action seq_plus_one() {
        meta.seq1 = hdr.hina.seq + 1;
    }

    // Pass 1 works on block 1 of the slot copy: pass 0's lane index ^ 1.
    action index_next_block() {
        meta.lane_index = next_block.get({hdr.pass.lane_base, 31w0, 1w1});
    }

    // A packet going round again: the pass header, and the bridge that tells egress so.
    action pass_next() {
        hdr.pass.setValid();
        hdr.pass.pass = meta.pass + 1;
    }
    action pass_reply() { hdr.pass.reply = meta.reply; }
    action to_recirculation() {
        hdr.bridge.setValid();
        hdr.bridge.reply = REPLY_RECIRCULATE;
        ig_tm_md.ucast_egress_port = TNA_RECIRC_PORT;
    }

    // Pass 0's decisions, into the pass header: one field per action (an action writes a PHV
    // container from one source besides the container itself).
    action pass_new_round() { hdr.pass.new_round = meta.new_round; }
    action pass_worker() { hdr.pass.worker_id = meta.worker_id; }
    action pass_bitmap() { hdr.pass.bitmap_old = meta.bitmap_old; }
    action pass_lane_base() { hdr.pass.lane_base = meta.lane_index; }
    action pass_count() { hdr.pass.count = meta.n_workers; }
    action pass_group() { hdr.pass.mcast_grp = meta.mcast_grp; }
    action pass_generation() { hdr.pass.generation = meta.generation; }
    action pass_port() { hdr.pass.port = ig_intr_md.ingress_port; }

    // Pass 0's decisions go into the pass header of every packet from the wire (not emitted
    // unless it recirculates); recirculate_contribution and pass_reply_0 only for an accepted
    // contribution (reason NONE). Tables keyed on the gate, not gateways: see apply.
#define TNA_PASS_0(act) \
    table act##_0 { \
        key = { meta.recirculated: exact @name("recirculated"); } \
        actions = { act; NoAction; } \
        const entries = { 0 : act(); } \
        size = 1; \
        const default_action = NoAction(); \
    }
#define TNA_PASS_0_ACCEPTED(table_name, act) \
    table table_name { \
        key = { \
            meta.recirculated: exact @name("recirculated"); \
            meta.in_slot:      exact @name("in_slot"); \
            meta.reason:       exact @name("reason"); \
        } \
        actions = { act; NoAction; } \
        const entries = { (0, 1, REASON_NONE) : act(); } \
        size = 1; \
        const default_action = NoAction(); \
    }
    TNA_PASS_0(pass_new_round)
    TNA_PASS_0(pass_worker)
    TNA_PASS_0(pass_bitmap)
    TNA_PASS_0(pass_lane_base)
    TNA_PASS_0(pass_count)
    TNA_PASS_0(pass_group)
    TNA_PASS_0(pass_generation)
    TNA_PASS_0(pass_port)
    // An accepted contribution: counted, and round again for block 1.
    action recirculate() {
        job_counter.count(hdr.hina.job_id);
        hdr.pass.setValid();
        hdr.pass.pass = meta.pass + 1;
        hdr.bridge.setValid();
        hdr.bridge.reply = REPLY_RECIRCULATE;
        ig_tm_md.ucast_egress_port = TNA_RECIRC_PORT;
    }
    TNA_PASS_0_ACCEPTED(recirculate_contribution, recirculate)
    TNA_PASS_0_ACCEPTED(pass_reply_0, pass_reply)

    action bridge_pair_value() { hdr.bridge.pair_value = hdr.pair.value; }
    action bridge_pair_add() { hdr.bridge.pair_add = 1; }
    action bridge_pair_skip() { hdr.bridge.pair_add = 0; }
    action bridge_reply() {
        hdr.bridge.setValid();
        hdr.bridge.reply = meta.reply;
    }
    // Replies, one header field per action.
    // The multicast reply's four writes in one action (four logical tables fewer in the reply,
    // whose tables fill the two stages after the sketch's last one): each writes its own
    // containers from one source.
    action from_switch_to_group() {
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.udp.src_port = hdr.udp.dst_port;
        ig_tm_md.mcast_grp_a = hdr.pass.mcast_grp;
    }
    // Swaps through a local (P4's statements are sequential: `d = s; s = d;` would leave both
    // at s); bf-p4c makes each one parallel move, as Tofino's VLIW reads before it writes.
    action swap_mac() {
        mac_addr_t sender = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = sender;
    }
    action swap_addr() {
        ipv4_addr_t sender = hdr.ipv4.src_addr;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = sender;
    }
    action swap_port() {
        bit<16> sender = hdr.udp.src_port;
        hdr.udp.src_port = hdr.udp.dst_port;
        hdr.udp.dst_port = sender;
    }
    action to_sender() { ig_tm_md.ucast_egress_port = hdr.pass.port; }
    action notice_type() { hdr.hina.version = HINA_VERSION; hdr.hina.msg_type = MSG_NOTICE; }
    action result_type() { hdr.hina.version = HINA_VERSION; hdr.hina.msg_type = MSG_RESULT; }
    action ack_type() { hdr.hina.version = HINA_VERSION; hdr.hina.msg_type = MSG_PAIRS_ACK; }
    action notice_op() { hdr.hina.op = meta.reason; }
    action clear_flags_count() { hdr.hina.flags = 0; hdr.hina.count = 0; }
    action flag_retransmit() { hdr.hina.flags = FLAG_RETRANSMIT; }
    action result_count() { hdr.hina.count = hdr.pass.count; }
    action header_only_lengths() {
        hdr.udp.length = UDP_BYTES + HINA_HEADER_BYTES;
        hdr.ipv4.total_len = IPV4_BYTES + UDP_BYTES + HINA_HEADER_BYTES;
    }
    action result_lengths() {
        hdr.udp.length = UDP_BYTES + HINA_HEADER_BYTES + 4 * TNA_WORDS;
        hdr.ipv4.total_len = IPV4_BYTES + UDP_BYTES + HINA_HEADER_BYTES + 4 * TNA_WORDS;
    }
    action notice_generation() { hdr.hina.generation = meta.generation; }
#if TNA_BLOCK_SPARSE
    // Block-sparse, pass 0 (stage 0), so that the reply adds no table (its two stages are full):
    // the packet takes the RESULT's op and lengths now, pass 1 keeps them (result_lengths is
    // skipped for a block packet), and its block header's `next` becomes the round's minimum on
    // the way (TnaBlockNext). A BLOCK_SKIP contributes a zero block: its two blocks are made
    // valid and zero, so that the lanes add zeros (a round's first packet stores them) and a
    // completing SKIP carries the result out; pass 1 parses it as the BLOCK_SUM it now is.
    // A packet dropped in pass 0 never shows the rewrite (a NOTICE rewrites op and lengths).
#define TNA_ZERO_WORD(i) hdr.words_a.w##i = 0; hdr.words_b.w##i = 0;
    action block_lengths() {
        hdr.udp.length = UDP_BYTES + HINA_HEADER_BYTES + HINA_BLOCK_BYTES + 4 * TNA_WORDS;
        hdr.ipv4.total_len = IPV4_BYTES + UDP_BYTES + HINA_HEADER_BYTES + HINA_BLOCK_BYTES
                             + 4 * TNA_WORDS;
    }
    action zero_blocks() {
        hdr.hina.op = OP_BLOCK_SUM;
        block_lengths();
        hdr.words_a.setValid();
        hdr.words_b.setValid();
        TNA_FOR_EACH_LANE(TNA_ZERO_WORD)
    }
    table block_request {
        key = {
            meta.recirculated: exact @name("recirculated");
            hdr.hina.op:       exact @name("op");
        }
        actions = { block_lengths; zero_blocks; NoAction; }
        const entries = {
            (0, OP_BLOCK_SUM) : block_lengths();
            (0, OP_BLOCK_SKIP) : zero_blocks();
        }
        size = 2;
        const default_action = NoAction();
    }
// The slot state's gate: the next block beyond this one (TnaValidate's block_gap).
#define TNA_BLOCK_GAP_OK && meta.block_gap != 0
#else
#define TNA_BLOCK_GAP_OK
#endif

    apply {
        if (hdr.hina.isValid()) {
            if (meta.recirculated == 0) {
                validate.apply(hdr, meta, ig_prsr_md);
                seq_plus_one();
            }
            admission.apply(hdr, meta, ig_intr_md);
#if TNA_BLOCK_SPARSE
            // Stage 0 or 1 (it writes what the validation reads), not in a gateway's block that
            // admission follows; before the LUT tables, which write words_a too.
            block_request.apply();
#endif
            // The slot state starts in stage 1: its gate is stage 0's raw outcomes (admitted,
            // i.e. the job exists and the sender is one of its workers of the job's current
            // generation (worker_admission's key), in the job's slots, well formed). The drop
            // reason (TnaReason) is worked out only where the slot state is not entered: the two
            // are mutually exclusive, so nothing TnaReason writes (meta.generation, meta.reason)
            // is on the slot state's path, and it is placed off the critical chain.
            if (meta.recirculated == 1) {
                if (hdr.hina.msg_type == MSG_AGGREGATE) {
                    index_next_block();
                }
            } else if (hdr.hina.msg_type == MSG_AGGREGATE && meta.verdict == VERDICT_OK
                       && !meta.ipv4_err && meta.job_miss == 0 && meta.worker_miss == 0
                       && meta.slot_miss == 0 TNA_BLOCK_GAP_OK) {
                slot_state.apply(hdr, meta);
            } else {
                reason.apply(hdr, meta, ig_intr_md);
            }
            if (hdr.hina.msg_type == MSG_AGGREGATE) {
                // One sequence of plain tables, gates in their keys: Tofino 1 places a gateway's
                // block after everything before it in sequence, so these go beside each other
                // by their dependencies alone: lut_<i> in the stage before lane_<i>, the lanes
                // right after slot_bitmap, the slot outcome and the pass header beside them.
#if TNA_BLOCK_SPARSE
                slot_bitmap.apply(hdr, meta);   // stage 4, after block_index (tna_slot_state.p4)
#endif
                thc_lut.apply(hdr, meta);
                lanes.apply(hdr, meta);
#if TNA_BLOCK_SPARSE
                block_next.apply(hdr, meta);
#endif
                slot_outcome.apply(hdr, meta);
                pass_new_round_0.apply();
                pass_worker_0.apply();
                pass_bitmap_0.apply();
                pass_lane_base_0.apply();
                pass_count_0.apply();
                pass_group_0.apply();
                pass_generation_0.apply();
                pass_port_0.apply();
                recirculate_contribution.apply();   // block 1 (TNA_BLOCKS = 2)
                pass_reply_0.apply();
            } else if (hdr.hina.msg_type == MSG_PAIRS) {
                if (meta.recirculated == 0 && meta.reason == REASON_NONE) {
                    job_counter.count(hdr.hina.job_id);
                    if (meta.sketch_mask == 0) {
                        meta.reason = REASON_BAD_JOB;   // the job has no in-switch sketch
                    } else {
                        pair_stream.apply(hdr, meta);
                        if (meta.stream_order == PAIRS_IN_ORDER) {
                            meta.pair_add = 1;
                        } else if (meta.stream_order == PAIRS_OLD) {
                            meta.reply = REPLY_UNICAST;   // applied before: acknowledge only
                        } else {
                            meta.reason = REASON_OUT_OF_ORDER;
                        }
                    }
                } else if (meta.recirculated == 1) {
                    meta.pair_add = 1;
                }
                sketch_cells.apply(hdr, meta);
                if (meta.pair_add == 1) {
                    if (meta.pass == HINA_PAIRS) {
                        meta.reply = REPLY_UNICAST;       // every pair added: the ACK
                    } else {
                        if (meta.recirculated == 0) {
                            pass_port();
                        }
                        pass_next();
                        pass_reply();
                        to_recirculation();
                        bridge_pair_value();
                        if (hdr.pair.value != 0) {   // 0 is padding
                            bridge_pair_add();
                        } else {
                            bridge_pair_skip();
                        }
                    }
                }
            }
            if (meta.reason != REASON_NONE) {
                reason_counter.count(meta.reason);
            }
        } else if (hdr.udp.isValid()
                   && (hdr.udp.dst_port & HINA_UDP_PORT_MASK) == HINA_UDP_PORT_BASE) {
            // To a HINA port without a whole HINA header (other UDP traffic is dropped
            // uncounted, as p4/hina.p4 does).
            reason_counter.count(REASON_MALFORMED);
        }

        if (hdr.bridge.isValid()) {
            // Going round again: pass header and payload as they are.
        } else if (meta.reply == REPLY_NONE
                   || (meta.reason != REASON_NONE && meta.reply != REPLY_NOTICE)) {
            ig_dprsr_md.drop_ctl = 1;
        } else {
            // The last pass: the reply (as p4/include/egress_rewrite.p4's Reply). One header
            // field (or byte of constants) per action: an action may write a PHV container from
            // one source besides the container itself.
            if (meta.reply == REPLY_NOTICE) {
                notice_type();
                notice_op();
                clear_flags_count();
                notice_generation();
                hdr.words_a.setInvalid();
                hdr.words_b.setInvalid();
                hdr.thc_a.setInvalid();
                hdr.thc_b.setInvalid();
                hdr.pair.setInvalid();
                hdr.pair_rest.setInvalid();
#if TNA_BLOCK_SPARSE
                hdr.block.setInvalid();
#endif
                header_only_lengths();
                hdr.pass.port = ig_intr_md.ingress_port;
            } else if (hdr.hina.msg_type == MSG_AGGREGATE) {
                result_type();
                if (meta.reply == REPLY_UNICAST) {
                    flag_retransmit();
                } else {
                    clear_flags_count();
                }
                result_count();
#if TNA_BLOCK_SPARSE
                if (!hdr.block.isValid()) {   // a block packet's were set in pass 0
                    result_lengths();
                }
#else
                result_lengths();
#endif
            } else {
                ack_type();
                clear_flags_count();
                hdr.pair.setInvalid();
                hdr.pair_rest.setInvalid();
                header_only_lengths();
                if (meta.recirculated == 0) {
                    hdr.pass.port = ig_intr_md.ingress_port;   // an old PAIRS packet
                }
            }
            hdr.udp.checksum = 0;
            bridge_reply();
            if (meta.reply == REPLY_MULTICAST) {
                from_switch_to_group();
            } else {
                swap_mac();
                swap_addr();
                swap_port();
                to_sender();
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

    TnaSketchRows() sketch_rows;

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
        if (hdr.bridge.reply == REPLY_RECIRCULATE) {
            if (hdr.bridge.pair_add == 1) {
                sketch_rows.apply(hdr);
            }
        } else {
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
