// Index lists for the TNA per-lane macros (written out in decimal so that generated names read
// lane_17, lut_17). TNA_LANES words are aggregated per pass (see hina_tna.p4).
//   TNA_FOR_EACH_LANE(M)       M(0) .. M(TNA_LANES - 1)
//   TNA_FOR_EACH_LANE_PAST_64_BYTES(M)  M(16) .. M(TNA_LANES - 1)
//   TNA_FOR_EACH_REST_PAIR(M)  M(1) .. M(HINA_PAIRS - 1)  (the pairs behind the one in work)
//   TNA_FOR_EACH_WORKER(M)     M(w, 1 << w) for w in 0 .. HINA_MAX_WORKERS - 1
//   TNA_FOR_EACH_WORKER_WITH(M, a)  M(a, w, 1 << w)
#ifndef _HINA_TNA_LISTS_P4_
#define _HINA_TNA_LISTS_P4_

#if TNA_LANES == 1
#define TNA_FOR_EACH_LANE(M) \
    M(0)
#elif TNA_LANES == 2
#define TNA_FOR_EACH_LANE(M) \
    M(0) M(1)
#elif TNA_LANES == 4
#define TNA_FOR_EACH_LANE(M) \
    M(0) M(1) M(2) M(3)
#elif TNA_LANES == 8
#define TNA_FOR_EACH_LANE(M) \
    M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#elif TNA_LANES == 16
#define TNA_FOR_EACH_LANE(M) \
    M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)
#elif TNA_LANES == 24
#define TNA_FOR_EACH_LANE(M) \
    M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15) \
    M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23)
#elif TNA_LANES == 32
#define TNA_FOR_EACH_LANE(M) \
    M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15) \
    M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23) M(24) M(25) M(26) M(27) M(28) M(29) M(30) \
    M(31)
#else
#error "TNA_LANES must be 1, 2, 4, 8, 16, 24 or 32"
#endif

// TNA_FOR_EACH_LANE_PAST_64_BYTES(M): M(16) .. M(TNA_LANES - 1), the words of a block past its
// first 64 bytes (a Tofino 2 CLOT's most; hina_tna.p4); nothing for TNA_LANES <= 16.
#if TNA_LANES == 24
#define TNA_FOR_EACH_LANE_PAST_64_BYTES(M) \
    M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23)
#elif TNA_LANES == 32
#define TNA_FOR_EACH_LANE_PAST_64_BYTES(M) \
    M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23) M(24) M(25) M(26) M(27) M(28) M(29) M(30) \
    M(31)
#else
#define TNA_FOR_EACH_LANE_PAST_64_BYTES(M)
#endif

#if HINA_PAIRS == 8
#define TNA_FOR_EACH_REST_PAIR(M) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#elif HINA_PAIRS == 16
#define TNA_FOR_EACH_REST_PAIR(M) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) \
    M(11) M(12) M(13) M(14) M(15)
#endif

// TNA_FOR_EACH_WORKER(M): M(0, 0x00000001) .. M(31, 0x80000000): worker id and its bit.
#define TNA_FOR_EACH_WORKER(M) \
    M(0, 0x00000001) M(1, 0x00000002) M(2, 0x00000004) M(3, 0x00000008) \
    M(4, 0x00000010) M(5, 0x00000020) M(6, 0x00000040) M(7, 0x00000080) \
    M(8, 0x00000100) M(9, 0x00000200) M(10, 0x00000400) M(11, 0x00000800) \
    M(12, 0x00001000) M(13, 0x00002000) M(14, 0x00004000) M(15, 0x00008000) \
    M(16, 0x00010000) M(17, 0x00020000) M(18, 0x00040000) M(19, 0x00080000) \
    M(20, 0x00100000) M(21, 0x00200000) M(22, 0x00400000) M(23, 0x00800000) \
    M(24, 0x01000000) M(25, 0x02000000) M(26, 0x04000000) M(27, 0x08000000) \
    M(28, 0x10000000) M(29, 0x20000000) M(30, 0x40000000) M(31, 0x80000000)
#define TNA_FOR_EACH_WORKER_WITH(M, a) \
    M(a, 0, 0x00000001) M(a, 1, 0x00000002) M(a, 2, 0x00000004) M(a, 3, 0x00000008) \
    M(a, 4, 0x00000010) M(a, 5, 0x00000020) M(a, 6, 0x00000040) M(a, 7, 0x00000080) \
    M(a, 8, 0x00000100) M(a, 9, 0x00000200) M(a, 10, 0x00000400) M(a, 11, 0x00000800) \
    M(a, 12, 0x00001000) M(a, 13, 0x00002000) M(a, 14, 0x00004000) M(a, 15, 0x00008000) \
    M(a, 16, 0x00010000) M(a, 17, 0x00020000) M(a, 18, 0x00040000) M(a, 19, 0x00080000) \
    M(a, 20, 0x00100000) M(a, 21, 0x00200000) M(a, 22, 0x00400000) M(a, 23, 0x00800000) \
    M(a, 24, 0x01000000) M(a, 25, 0x02000000) M(a, 26, 0x04000000) M(a, 27, 0x08000000) \
    M(a, 28, 0x10000000) M(a, 29, 0x20000000) M(a, 30, 0x40000000) M(a, 31, 0x80000000)

#endif  // _HINA_TNA_LISTS_P4_
