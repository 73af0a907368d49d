// Headers and metadata of the HINA dataplane. Wire layout: docs/protocol.md.
#ifndef _HINA_HEADERS_P4_
#define _HINA_HEADERS_P4_

#include "config.p4"
#include "types.p4"
#include "lanes.p4"

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<8>      diffserv;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// The fixed HINA header (HINA_HEADER_BYTES = 16 bytes, version 2).
header hina_t {
    bit<4>  version;     // HINA_VERSION
    bit<4>  msg_type;    // MSG_*
    bit<8>  op;          // OP_* (AGGREGATE, RESULT); 0 otherwise
    bit<8>  flags;       // FLAG_*
    bit<8>  count;       // RESULT: contributors; PAIRS: pairs in use (informative)
    bit<16> job_id;
    bit<1>  pool;        // which of the two copies of the slot (SwitchML's shadow set)
    bit<15> slot;        // slot index within the job
    bit<32> seq;         // worker sequence number, echoed by the switch
    bit<16> generation;  // sender's job generation; replies: the generation they belong to
    bit<16> reserved;    // 0 (anything else is MALFORMED)
}

// HARVEST / RESET / HARVEST_DATA: which block of which in-switch sketch row.
header hina_harvest_t {
    bit<8>  row;
    bit<8>  reserved;
    bit<16> block;       // counters [block * HINA_WORDS, (block + 1) * HINA_WORDS) of the row
}

// Block-sparse messages (OP_BLOCK_SUM, OP_BLOCK_SKIP and their RESULT): which block, and the
// next one: in a contribution, the sender's next nonzero block after this one; in a RESULT, the
// next block the slot aggregates (the minimum of its round's announcements). HINA_BLOCK_END: none.
header hina_sparse_t {
    bit<32> block;
    bit<32> next;
}

// SUM / MAX / OR payload and every RESULT: HINA_WORDS big-endian 32-bit words.
#define HINA_WORD_FIELD(i) bit<32> w##i;
header hina_words_t {
    HINA_FOR_EACH_WORD(HINA_WORD_FIELD)
}

// THC (LUT_SUM) payload: 2 * HINA_WORDS 4-bit table indices, the first coordinate of each
// byte in its high nibble. Coordinate 2i is hi<i>, coordinate 2i+1 is lo<i>.
#define HINA_NIBBLE_FIELDS(i) bit<4> hi##i; bit<4> lo##i;
header hina_thc_t {
    HINA_FOR_EACH_WORD(HINA_NIBBLE_FIELDS)
}

// PAIRS payload: HINA_PAIRS (index, value) pairs; value is a signed 32-bit integer, 0 = padding.
#define HINA_PAIR_FIELDS(p) bit<32> index##p; bit<32> value##p;
header hina_pairs_t {
    HINA_FOR_EACH_PAIR(HINA_PAIR_FIELDS)
}

struct headers_t {
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    udp_t          udp;
    hina_t         hina;
    hina_sparse_t  block;
    hina_harvest_t harvest;
    hina_thc_t     thc;
    hina_pairs_t   pairs;
    hina_words_t   words;
}

// THC table values of the packet's coordinates, set by the lookup tables (lut.p4).
#define HINA_THC_VALUE_FIELDS(i) bit<16> hi##i; bit<16> lo##i;
struct thc_values_t {
    HINA_FOR_EACH_WORD(HINA_THC_VALUE_FIELDS)
}

// Reply kinds decided by ingress.
#define REPLY_NONE 0
#define REPLY_MULTICAST 1
#define REPLY_UNICAST 2
#define REPLY_NOTICE 3           // header-only NOTICE back to the sender (meta.reason says why)

struct metadata_t {
    // Outcome.
    bit<8>      reason;          // REASON_*, counted once per packet when non-zero
    bit<2>      reply;           // REPLY_*
    // Job configuration (job_config table).
    bit<16>     n_slots;         // slots of the job
    bit<8>      lut_id;          // THC table id of the job
    bit<32>     sketch_base;     // first counter of the job in each sketch row
    bit<32>     sketch_mask;     // columns - 1 (columns a power of two)
    bit<32>     sketch_seed;     // hash seed S
    // Worker admission (worker_admission table).
    bit<8>      worker_id;
    bit<32>     worker_bit;      // 1 << worker_id
    bit<8>      n_workers;
    bit<16>     mcast_grp;
    reg_index_t reg_base;        // first slot of the job
    reg_index_t pair_stream;     // PAIRS sequence stream of this worker
    bit<16>     generation;      // the job's current generation
    // Slot state (slot_state.p4).
    reg_index_t slot_index;      // reg_base + slot: index of per-slot registers
    reg_index_t reg_index;       // slot_index * 2 + pool: index of per-copy registers
    bit<1>      reclaim;         // the copy (or PAIRS stream) was last used by another generation
    bit<1>      other_current;   // the slot's other copy is of the job's current generation
    bit<1>      other_newer;     // ... and its current use is newer than this packet's chunk
    bit<1>      new_round;       // first packet of a new use of this slot copy
    bit<1>      stale;           // packet of an older use of this slot copy
    bit<1>      contribute;      // new contribution: aggregate it
    bit<1>      retransmit;      // this worker already contributed to this use
    bit<8>      count;           // contributors so far (after this packet)
    // Block-sparse (slot_state.p4: block_index, block_next).
    bit<1>      block_mismatch;  // the packet's block is not the copy's current round's
    bit<32>     block_index;     // the block the copy's current round aggregates
    bit<32>     block_next;      // the smallest next announced in the round so far
    // Lane ALU (lane_alu.p4).
    bit<8>      alu_mode;        // ALU_*
    bit<32>     keep_mask;       // 0 on the first contribution (overwrite), all ones after
    bit<1>      check_overflow;  // 1 for ALU_SUM
    bit<1>      lane_overflow;   // some lane (or sketch counter) overflowed in this packet
    bit<8>      result_flags;    // flags of the slot copy after this packet
    bit<1>      lut_miss;        // some THC index had no table entry
    thc_values_t thc;
    // In-switch sketch (sketch.p4).
    bit<1>      pairs_apply;     // in-order PAIRS packet: add it
    bit<1>      pairs_old;       // already applied: acknowledge only
    bit<32>     harvest_base;    // first counter of the requested block
#define HINA_SEED_FIELD(r) bit<32> seed##r; bit<32> row_offset##r;
    HINA_FOR_EACH_ROW(HINA_SEED_FIELD)
}

#endif  // _HINA_HEADERS_P4_
