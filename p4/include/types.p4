// Protocol numbers shared with hina/protocol.py (bmv2_tests/test_protocol_parity.py checks).
#ifndef _HINA_TYPES_P4_
#define _HINA_TYPES_P4_

#define ETHERTYPE_IPV4 0x0800
#define IP_PROTO_UDP 17
#define UDP_NO_CHECKSUM 0     // a UDP checksum field of 0: the sender computed none
#define IPV4_IHL_NO_OPTIONS 5

// UDP destination ports [HINA_UDP_PORT_BASE, HINA_UDP_PORT_BASE + 16) carry HINA.
#define HINA_UDP_PORT_BASE 0xBEE0
#define HINA_UDP_PORT_MASK 0xFFF0
#define HINA_VERSION 4      // v4: block-sparse aggregation (docs/protocol.md, Changelog)

// Header sizes in bytes, for the length fields of rewritten packets.
#define IPV4_BYTES 20
#define UDP_BYTES 8
#define HINA_HEADER_BYTES 16
#define HINA_HARVEST_BYTES 4
#define HINA_PAIR_BYTES 8
#define HINA_BLOCK_BYTES 8    // block header of block-sparse messages (block, next)

// msg_type (4 bits).
#define MSG_AGGREGATE 1
#define MSG_RESULT 2
#define MSG_PAIRS 3
#define MSG_PAIRS_ACK 4
#define MSG_HARVEST 5
#define MSG_HARVEST_DATA 6
#define MSG_RESET 7
#define MSG_NOTICE 8         // switch -> worker only: header-only answer to a stale packet

// op (8 bits): lane operation of AGGREGATE / RESULT.
#define OP_SUM 1
#define OP_LUT_SUM 2
#define OP_MAX 3
#define OP_OR 4
#define OP_BLOCK_SUM 5       // block-sparse: block header + HINA_WORDS lanes, summed as OP_SUM
#define OP_BLOCK_SKIP 6      // block-sparse: block header only (the sender's block is zero)

// Block header `next` meaning "no further nonzero block".
#define HINA_BLOCK_END 32w0xFFFFFFFF

// flags (8 bits).
#define FLAG_OVERFLOW 0x01
#define FLAG_RETRANSMIT 0x02

// Index into reason_counter.
#define REASON_NONE 0
#define REASON_UNKNOWN_WORKER 1
#define REASON_BAD_JOB 2
#define REASON_BAD_SLOT 3
#define REASON_MALFORMED 4
#define REASON_STALE_POOL 5
#define REASON_OVERFLOW 6
#define REASON_DUPLICATE 7
#define REASON_OUT_OF_ORDER 8
#define REASON_WRONG_PORT 9     // a worker's addresses on another port or with another MAC
#define REASON_STALE_GENERATION 10   // an admitted sender of another generation (NOTICE sent)
#define REASON_BAD_CHECKSUM 11  // UDP checksum missing or wrong: corrupted after the FCS
#define REASON_BAD_BLOCK 12     // block-sparse: not the block the slot copy's round aggregates

// Sketch hash: F_r(x) = crc32(seed_r ++ (x + seed_r * HINA_ROW_OFFSET_MULTIPLIER)), applied
// HINA_HASH_PASSES times (hina/hashing.py). sketch.p4 unrolls exactly two passes.
#define HINA_HASH_PASSES 2
#define HINA_ROW_OFFSET_MULTIPLIER 32w0x9E3779B1

// Lane ALU modes (internal, not on the wire).
#define ALU_SUM 0        // signed add, overflow detected
#define ALU_ADD16X2 1    // two packed 16-bit THC sums; the controller bounds n*g < 2^16
#define ALU_MAX 2        // unsigned maximum
#define ALU_OR 3         // bitwise or
#define ALU_READ 4       // no change: read the stored result back

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<32> reg_index_t;

#endif  // _HINA_TYPES_P4_
