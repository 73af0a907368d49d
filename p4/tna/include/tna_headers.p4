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

// Lane operations (one RegisterAction each on every lane register, see tna_lanes.p4).
#define LANE_NONE 0
#define LANE_WRITE 1      // first contribution to a new use: store the packet's word (any op)
#define LANE_SUM 2        // SUM and LUT-SUM: saturating signed add
#define LANE_MAX 3        // unsigned maximum
#define LANE_OR 4         // bitwise or
#define LANE_READ 5       // a retransmission into a complete copy: read the stored result

// Prepended to a recirculated packet (the ingress parser knows it by the recirculation port).
header hina_pass_t {
    bit<8>  pass;        // 1 .. : which pass this is (0 is the packet from the wire)
    bit<8>  lane_op;     // LANE_* for the lanes of this pass
    bit<8>  reply;       // REPLY_* after the last pass
    bit<8>  count;       // RESULT count
    bit<16> mcast_grp;
    bit<16> generation;  // the job's current generation (NOTICE, RESULT)
    bit<32> lane_base;   // lane register index of block 0 of this slot copy
    bit<7>  pad0;
    bit<9>  port;        // the sender's ingress port (unicast replies)
}

// Ingress -> egress.
header hina_bridge_t {
    bit<8>  reply;       // REPLY_*
    bit<16> payload_sum; // ones' complement of the payload's 16-bit sum (ingress deparser)
}

struct tna_headers_t {
    hina_bridge_t     bridge;
    hina_pass_t       pass;
    ethernet_t        ethernet;
    ipv4_t            ipv4;
    udp_t             udp;
    hina_t            hina;
    hina_harvest_t    harvest;
    hina_block_t      words_b;   // emitted before words_a: see tna_parser.p4
    hina_block_t      words_a;   // the block the lanes of this pass work on
    hina_thc_block_t  thc_b;
    hina_thc_block_t  thc_a;
    hina_pair_t       pair;      // the pair this pass adds
    hina_pair_rest_t  pair_rest;
}

struct tna_ingress_metadata_t {
    bit<8>      reason;          // REASON_*
    bit<8>      reply;           // REPLY_*
    bool        ipv4_ok;         // the parser's IPv4 header checksum check
    bit<8>      pass;            // 0: from the wire
    // Job (job_config).
    bit<16>     n_slots;
    bit<8>      lut_id;
    bit<32>     sketch_base;
    bit<32>     sketch_mask;
#define TNA_SEED_FIELDS(r) bit<32> seed##r; bit<32> row_offset##r;
    HINA_FOR_EACH_ROW(TNA_SEED_FIELDS)
    // Worker (worker_admission).
    bit<32>     worker_bit;
    bit<32>     all_workers;     // bitmap of every worker of the job: a copy is complete at it
    bit<8>      n_workers;
    bit<16>     mcast_grp;
    bit<32>     reg_base;
    bit<32>     pair_stream;
    bit<16>     generation;
    // Slot state.
    bit<32>     slot_index;      // reg_base + slot
    bit<32>     reg_index;       // slot_index * 2 + pool
    bit<32>     bitmap_index;    // slot_index, through the hash unit
    bit<32>     seq1;            // seq + 1
    bit<1>      pool;            // hdr.hina.pool, in metadata for the index hash
    bit<16>     stored_generation;
    bit<32>     stored_seq1;
    bit<32>     seq_diff;        // seq1 - stored_seq1
    bit<1>      seq_older;       // seq_diff < 0 (serial order): an older use
    bit<32>     bitmap_old;      // this copy's contributors before this packet
    bit<32>     bitmap_mine;     // bitmap_old & worker_bit
    bit<32>     bitmap_new;
    bit<1>      reclaim;
    bit<1>      new_round;
    bit<8>      lane_op;         // LANE_*
    bit<32>     lane_index;      // lane register index of this pass's block
    bit<1>      lut_miss;
    // In-switch sketch.
    bit<16>     stream_generation;
    bit<32>     stream_next;
    bit<32>     pair_diff;       // seq - next expected
    bit<1>      pair_older;      // pair_diff < 0: applied before
    bit<1>      pair_add;        // add the pair in work to the rows in this pass
#define TNA_ROW_FIELDS(r) bit<32> key##r; bit<32> h1_##r; bit<32> h##r; bit<32> cell##r; \
    bit<32> cell_index##r; bit<1> neg##r;
    HINA_FOR_EACH_ROW(TNA_ROW_FIELDS)
}

struct tna_egress_metadata_t {
    bit<16> payload_sum;         // the payload's 16-bit ones' complement sum (from the bridge)
}

#endif  // _HINA_TNA_HEADERS_P4_
