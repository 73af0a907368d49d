// Compile-time sizes of the HINA dataplane. Each can be overridden with -D on the p4c (or
// softswitch) command line; hina/protocol.py holds the defaults and a test checks the parity.
// The cost of each is written beside it (BMv2 / embedded target: work per packet and register
// memory; Tofino: stages, SRAM, PHV).
#ifndef _HINA_CONFIG_P4_
#define _HINA_CONFIG_P4_

// 32-bit payload words per packet: 64, 128 or 256.
// Words live in register pairs (one 64-bit array per two words, each touched once per packet),
// so per-packet work is linear in it: one read-modify-write per pair of words, plus two THC
// table lookups per word for LUT-SUM.
// Payload: 4*HINA_WORDS bytes up for SUM/MAX/OR and down for every RESULT; HINA_WORDS bytes up
// for THC (2*HINA_WORDS coordinates). With the 58 B of headers, 128 words meets the THC wire
// goals (0.73 B/coordinate up, 2.23 down; 256 words: 0.61 / 2.11; 64 words misses them:
// 0.95 / 2.45). Tofino: SwitchML fits 64 words per pass (see docs/dataplane.md).
#ifndef HINA_WORDS
#define HINA_WORDS 128
#endif
#if HINA_WORDS == 64
#define HINA_WORDS_LOG2 6
#elif HINA_WORDS == 128
#define HINA_WORDS_LOG2 7
#elif HINA_WORDS == 256
#define HINA_WORDS_LOG2 8
#else
#error "HINA_WORDS must be 64, 128 or 256"
#endif

// Aggregation slots shared by all jobs; a job owns [reg_base, reg_base + n_slots).
// Memory: 2 pool copies * HINA_SLOT_CAPACITY entries in each of the HINA_WORDS lane arrays
// (128 words * 1024 * 4 B = 512 KiB at the defaults) plus the slot state arrays.
#ifndef HINA_SLOT_CAPACITY
#define HINA_SLOT_CAPACITY 512
#endif

// Job ids 0..HINA_MAX_JOBS-1: multicast replica ids are job * 64 + worker + 1 in 16 bits
// (hina/protocol.py MAX_JOB_ID). Cost: one packets-and-bytes counter cell per job.
#define HINA_MAX_JOBS 1024

// Workers per job. The contributor bitmap is 32 bits per pool copy (one 64-bit register entry
// holds both copies, as SwitchML does), so this cannot exceed 32 without widening it.
#define HINA_MAX_WORKERS 32

// (index, value) pairs per PAIRS packet: 8 or 16. Each pair costs HINA_SKETCH_ROWS hashes
// and register read-modify-writes.
#ifndef HINA_PAIRS
#define HINA_PAIRS 16
#endif

// Rows of the in-switch count sketch: 1, 3 or 5 (one register array per row).
#ifndef HINA_SKETCH_ROWS
#define HINA_SKETCH_ROWS 3
#endif

// Counters per sketch row shared by all jobs; a job owns [sketch_base, sketch_base + columns).
// Memory: HINA_SKETCH_ROWS * HINA_SKETCH_CAPACITY * 4 B (768 KiB at the defaults).
#ifndef HINA_SKETCH_CAPACITY
#define HINA_SKETCH_CAPACITY 65536
#endif

// PAIRS streams (job base + worker) whose next sequence number and generation the switch keeps
// (4 + 2 B each).
#ifndef HINA_PAIR_STREAMS
#define HINA_PAIR_STREAMS 1024
#endif

// Entries of the admission tables and of each THC lookup table.
#define HINA_ADMISSION_SIZE 1024
#define HINA_JOB_TABLE_SIZE 256
#define HINA_REPLICA_TABLE_SIZE 4096
#define HINA_LUTS 16                // THC tables installed at once (16 entries each per lane)

// Drop/exception reason counter array size (reasons 1..HINA_REASONS-1, see types.p4).
#define HINA_REASONS 16

#endif  // _HINA_CONFIG_P4_
