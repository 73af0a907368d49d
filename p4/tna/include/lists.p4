// Index lists for the TNA per-lane macros (written out in decimal so that generated names read
// lane_17, lut_17). TNA_LANES words are aggregated per pass (see hina_tna.p4).
//   TNA_FOR_EACH_LANE(M)       M(0) .. M(TNA_LANES - 1)
//   TNA_FOR_EACH_REST_PAIR(M)  M(1) .. M(HINA_PAIRS - 1)  (the pairs behind the one in work)
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

#if HINA_PAIRS == 8
#define TNA_FOR_EACH_REST_PAIR(M) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#elif HINA_PAIRS == 16
#define TNA_FOR_EACH_REST_PAIR(M) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) \
    M(11) M(12) M(13) M(14) M(15)
#endif

#endif  // _HINA_TNA_LISTS_P4_
