// Headers and metadata of the TNA program. The wire headers (Ethernet, IPv4, UDP, the HINA
// header v3, the harvest header) and every protocol constant come from the v1model program's
// p4/include/ (types.p4, config.p4, headers.p4), not copies. What is TNA's own:
//   * the payload is split into two blocks of TNA_LANES words (hina_block_t) and, for THC, two
//     blocks of TNA_LANES bytes (hina_thc_block_t): a pass aggregates one block, and the
//     deparser's emit order rotates the blocks so that the next pass finds the other block in
//     front (see tna_parser.p4). The bytes on the wire are those of hina_words_t / hina_thc_t.
//   * PAIRS: the pair in work (hina_pair_t) and the others (hina_pair_rest_t), rotated the same
//     way, one pair per pass;
//   * hina_pass_t: prepended to a recirculated packet, it carries what the first pass decided;
//   * hina_bridge_t: ingress -> egress, the reply kind and the payload's checksum share.
// Block-sparse (TNA_BLOCK_SPARSE=1, hina_tna.p4): the v1model program's block header
// (hina_sparse_t) in front of the blocks, and the metadata of tna_block_sparse.p4.
#ifndef _HINA_TNA_HEADERS_P4_
#define _HINA_TNA_HEADERS_P4_

#include "../../include/headers.p4"
#include "lists.p4"

#define TNA_BLOCKS 2                       // payload blocks = passes per AGGREGATE packet
#define TNA_WORDS (TNA_BLOCKS * TNA_LANES) // 32-bit words per packet (HINA_WORDS on the wire)

#define TNA_BLOCK_WORD(i) bit<32> w##i;
header hina_block_t {
    TNA_FOR_EACH_LANE(TNA_BLOCK_WORD)
}

#define TNA_THC_BYTE(i) bit<8> b##i;
header hina_thc_block_t {
    TNA_FOR_EACH_LANE(TNA_THC_BYTE)
}

header hina_pair_t {
    bit<32> index;
    bit<32> value;
}

#define TNA_REST_PAIR(p) bit<32> index##p; bit<32> value##p;
header hina_pair_rest_t {
    TNA_FOR_EACH_REST_PAIR(TNA_REST_PAIR)
}

// TnaValidate's verdict on a packet from the wire.
#define VERDICT_OK 0
#define VERDICT_MALFORMED 1
#define VERDICT_BAD_CHECKSUM 2  // v3's UDP checksum: missing, or wrong (the parser's udp_err)

// Prepended to a recirculated packet (the ingress parser knows it by the recirculation port).
// It carries what pass 0 decided, so that later passes pick the same RegisterActions without
// touching the slot state again.
header hina_pass_t {
    bit<8>  pass;        // 1 .. : which pass this is (0 is the packet from the wire)
    bit<8>  reply;       // REPLY_* after the last pass
    bit<7>  pad0;
    bit<1>  new_round;   // lane selection inputs of pass 0 (tna_lanes.p4)
    bit<8>  worker_id;
    bit<32> bitmap_old;
    bit<32> lane_base;   // lane register index of block 0 of the slot copy (reg_index * 2)
    bit<8>  count;       // RESULT count
    bit<16> mcast_grp;
    bit<16> generation;  // the job's current generation
    bit<7>  pad1;
    bit<9>  port;        // the sender's ingress port (unicast replies)
}

// Ingress -> egress. A PAIRS pass also brings the pair's counter cells: the sketch rows live in
// the egress stages of pipe 0, which every recirculated packet crosses (tna_sketch.p4).
header hina_bridge_t {
    // Each row's cell first: 32-bit fields on 32-bit boundaries of the header (an add's result
    // must sit alone in its PHV container, and a bridged header's layout is its containers').
#define TNA_BRIDGE_CELL(r) bit<32> cell##r;
#define TNA_BRIDGE_SIGN(r) bit<8> neg##r;
    HINA_FOR_EACH_ROW(TNA_BRIDGE_CELL)
    bit<32> pair_value;
    bit<16> payload_sum; // ones' complement of the payload's 16-bit sum (ingress deparser)
    bit<8>  reply;       // REPLY_*
    bit<8>  pair_add;    // 1: add the pair below to the rows
    HINA_FOR_EACH_ROW(TNA_BRIDGE_SIGN)
    bit<8>  pad;
}

struct tna_headers_t {
    hina_bridge_t     bridge;
    hina_pass_t       pass;
    ethernet_t        ethernet;
    ipv4_t            ipv4;
    udp_t             udp;
    hina_t            hina;
    hina_harvest_t    harvest;
#if TNA_BLOCK_SPARSE
    hina_sparse_t     block;     // block-sparse: (block, next), in front of the payload
#endif
    hina_block_t      words_b;   // emitted before words_a: see tna_parser.p4
    hina_block_t      words_a;   // the block the lanes of this pass work on
    hina_thc_block_t  thc_b;
    hina_thc_block_t  thc_a;
    hina_pair_rest_t  pair_rest; // emitted before the pair in work: see tna_parser.p4
    hina_pair_t       pair;      // the pair this pass adds
}

struct tna_ingress_metadata_t {
    bit<8>      reason;          // REASON_*
    bit<8>      reply;           // REPLY_*
    // The parser's checksum checks. Checksum.verify() is true when the sum is WRONG: bf-p4c
    // writes the parser checksum unit's error bit (its v1model translation ORs verify() into
    // parser_err's checksum bit), whatever tna.p4's comment suggests.
    bool        ipv4_err;        // the IPv4 header checksum is wrong (or the frame is not IPv4)
    bool        udp_err;         // a worker's message: its UDP checksum is wrong
    bit<1>      recirculated;    // 1: arrived on the recirculation port (pass >= 1)
    bit<8>      pass;            // 0: from the wire
    // Outcome of each admission check, apart, so that all are looked up in the first stage.
    bit<8>      verdict;         // TnaValidate: VERDICT_*
    bit<1>      ipv4_bad;        // TnaValidate: IPv4 header checksum wrong
    bit<1>      job_miss;        // job_config
    bit<1>      worker_miss;     // worker_admission (its key includes the generation)
    bit<1>      slot_miss;       // slot_range
    // Job (job_config).
    bit<16>     n_slots;
    bit<8>      lut_id;
    bit<32>     sketch_base;
    bit<32>     sketch_mask;
#define TNA_SEED_FIELDS(r) bit<32> seed##r; bit<32> row_offset##r;
    HINA_FOR_EACH_ROW(TNA_SEED_FIELDS)
    // Worker (worker_admission).
    bit<8>      worker_id;
    bit<32>     worker_bit;
    bit<32>     all_workers;     // bitmap of every worker of the job: a copy is complete at it
    bit<8>      n_workers;
    bit<16>     mcast_grp;
    bit<32>     slot_base;       // the job's first slot (reg_base), aligned (tna_slot_state.p4)
    bit<32>     copy_base;       // 2 * slot_base
    bit<32>     lane_base;       // 4 * slot_base
    bit<32>     pair_stream;
    bit<16>     generation;
    // Slot state.
    bit<1>      in_slot;         // the packet reached the slot state (pass 0) or is a later pass
    bit<32>     seq1;            // seq + 1
    bit<32>     reg_index;       // (slot_base + slot) * 2 + pool
    bit<32>     lane_index;      // reg_index * 2 + pass
    bit<16>     stored_generation;
    bit<4>      seq_order;       // predicate of check_round (tna_slot_state.p4)
    bit<32>     bitmap_old;      // this copy's contributors before this packet
    bit<1>      new_round;
    bit<1>      stale;
    bit<1>      lut_miss;
    // Slot outcome (tna_slot_state.p4): the comparisons a table can match on (x == 0).
    bit<32>     others;          // all_workers ^ worker_bit: the job's other workers
    bit<32>     mine;            // bitmap_old & worker_bit: the worker already counted
    bit<32>     d_others;        // bitmap_old ^ others: 0 when this packet completes the copy
    bit<32>     d_all;           // bitmap_old ^ all_workers: 0 when the copy is complete
#if TNA_BLOCK_SPARSE
    // Block-sparse (tna_block_sparse.p4).
    bit<32>     block_gap;       // next |-| block: 0 when next is not beyond block (MALFORMED)
    bit<4>      block_check;     // 0: not block-sparse, BLOCK_MATCH, BLOCK_MISMATCH
    bit<1>      block_bad;       // the packet's block is not its round's (BAD_BLOCK)
#endif
    // In-switch sketch.
    bit<16>     stream_generation;
    bit<4>      stream_order;    // predicate of check_pair_seq
    bit<1>      pair_add;
#define TNA_ROW_FIELDS(r) bit<32> key##r; bit<32> h##r; bit<32> bucket##r;
    HINA_FOR_EACH_ROW(TNA_ROW_FIELDS)
}

struct tna_egress_metadata_t {
    bit<16> payload_sum;         // the payload's 16-bit ones' complement sum (from the bridge)
}

#endif  // _HINA_TNA_HEADERS_P4_
