// Index lists for the per-lane macros: each applies a macro M to consecutive decimal indices, so
// that generated names stay readable (w0, lut_hi_17, sketch_add_3_1).
//   HINA_FOR_EACH_WORD(M)          M(0) .. M(HINA_WORDS - 1)
//   HINA_FOR_EACH_WORD_WITH(M, a)  M(a, 0) .. M(a, HINA_WORDS - 1)
//   HINA_FOR_EACH_WORD_PAIR(M)     M(0, 0, 1) M(1, 2, 3) .. (register pairs of words)
//   HINA_FOR_EACH_PAIR(M)          M(0) .. M(HINA_PAIRS - 1)
//   HINA_FOR_EACH_ROW(M)           M(0) .. M(HINA_SKETCH_ROWS - 1)
//   HINA_FOR_EACH_ROW_WITH(M, a)   M(a, 0) .. M(a, HINA_SKETCH_ROWS - 1)
#ifndef _HINA_LANES_P4_
#define _HINA_LANES_P4_

#include "config.p4"

#define HINA_WORDS_0_63(M) \
    M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15) \
    M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23) M(24) M(25) M(26) M(27) M(28) M(29) M(30) M(31) \
    M(32) M(33) M(34) M(35) M(36) M(37) M(38) M(39) M(40) M(41) M(42) M(43) M(44) M(45) M(46) M(47) \
    M(48) M(49) M(50) M(51) M(52) M(53) M(54) M(55) M(56) M(57) M(58) M(59) M(60) M(61) M(62) M(63)
#define HINA_WORDS_0_63_WITH(M, a) \
    M(a, 0) M(a, 1) M(a, 2) M(a, 3) M(a, 4) M(a, 5) M(a, 6) M(a, 7) M(a, 8) M(a, 9) M(a, 10) M(a, 11) M(a, 12) M(a, 13) M(a, 14) M(a, 15) \
    M(a, 16) M(a, 17) M(a, 18) M(a, 19) M(a, 20) M(a, 21) M(a, 22) M(a, 23) M(a, 24) M(a, 25) M(a, 26) M(a, 27) M(a, 28) M(a, 29) M(a, 30) M(a, 31) \
    M(a, 32) M(a, 33) M(a, 34) M(a, 35) M(a, 36) M(a, 37) M(a, 38) M(a, 39) M(a, 40) M(a, 41) M(a, 42) M(a, 43) M(a, 44) M(a, 45) M(a, 46) M(a, 47) \
    M(a, 48) M(a, 49) M(a, 50) M(a, 51) M(a, 52) M(a, 53) M(a, 54) M(a, 55) M(a, 56) M(a, 57) M(a, 58) M(a, 59) M(a, 60) M(a, 61) M(a, 62) M(a, 63)
#define HINA_WORDS_64_127(M) \
    M(64) M(65) M(66) M(67) M(68) M(69) M(70) M(71) M(72) M(73) M(74) M(75) M(76) M(77) M(78) M(79) \
    M(80) M(81) M(82) M(83) M(84) M(85) M(86) M(87) M(88) M(89) M(90) M(91) M(92) M(93) M(94) M(95) \
    M(96) M(97) M(98) M(99) M(100) M(101) M(102) M(103) M(104) M(105) M(106) M(107) M(108) M(109) M(110) M(111) \
    M(112) M(113) M(114) M(115) M(116) M(117) M(118) M(119) M(120) M(121) M(122) M(123) M(124) M(125) M(126) M(127)
#define HINA_WORDS_64_127_WITH(M, a) \
    M(a, 64) M(a, 65) M(a, 66) M(a, 67) M(a, 68) M(a, 69) M(a, 70) M(a, 71) M(a, 72) M(a, 73) M(a, 74) M(a, 75) M(a, 76) M(a, 77) M(a, 78) M(a, 79) \
    M(a, 80) M(a, 81) M(a, 82) M(a, 83) M(a, 84) M(a, 85) M(a, 86) M(a, 87) M(a, 88) M(a, 89) M(a, 90) M(a, 91) M(a, 92) M(a, 93) M(a, 94) M(a, 95) \
    M(a, 96) M(a, 97) M(a, 98) M(a, 99) M(a, 100) M(a, 101) M(a, 102) M(a, 103) M(a, 104) M(a, 105) M(a, 106) M(a, 107) M(a, 108) M(a, 109) M(a, 110) M(a, 111) \
    M(a, 112) M(a, 113) M(a, 114) M(a, 115) M(a, 116) M(a, 117) M(a, 118) M(a, 119) M(a, 120) M(a, 121) M(a, 122) M(a, 123) M(a, 124) M(a, 125) M(a, 126) M(a, 127)
#define HINA_WORDS_128_191(M) \
    M(128) M(129) M(130) M(131) M(132) M(133) M(134) M(135) M(136) M(137) M(138) M(139) M(140) M(141) M(142) M(143) \
    M(144) M(145) M(146) M(147) M(148) M(149) M(150) M(151) M(152) M(153) M(154) M(155) M(156) M(157) M(158) M(159) \
    M(160) M(161) M(162) M(163) M(164) M(165) M(166) M(167) M(168) M(169) M(170) M(171) M(172) M(173) M(174) M(175) \
    M(176) M(177) M(178) M(179) M(180) M(181) M(182) M(183) M(184) M(185) M(186) M(187) M(188) M(189) M(190) M(191)
#define HINA_WORDS_128_191_WITH(M, a) \
    M(a, 128) M(a, 129) M(a, 130) M(a, 131) M(a, 132) M(a, 133) M(a, 134) M(a, 135) M(a, 136) M(a, 137) M(a, 138) M(a, 139) M(a, 140) M(a, 141) M(a, 142) M(a, 143) \
    M(a, 144) M(a, 145) M(a, 146) M(a, 147) M(a, 148) M(a, 149) M(a, 150) M(a, 151) M(a, 152) M(a, 153) M(a, 154) M(a, 155) M(a, 156) M(a, 157) M(a, 158) M(a, 159) \
    M(a, 160) M(a, 161) M(a, 162) M(a, 163) M(a, 164) M(a, 165) M(a, 166) M(a, 167) M(a, 168) M(a, 169) M(a, 170) M(a, 171) M(a, 172) M(a, 173) M(a, 174) M(a, 175) \
    M(a, 176) M(a, 177) M(a, 178) M(a, 179) M(a, 180) M(a, 181) M(a, 182) M(a, 183) M(a, 184) M(a, 185) M(a, 186) M(a, 187) M(a, 188) M(a, 189) M(a, 190) M(a, 191)
#define HINA_WORDS_192_255(M) \
    M(192) M(193) M(194) M(195) M(196) M(197) M(198) M(199) M(200) M(201) M(202) M(203) M(204) M(205) M(206) M(207) \
    M(208) M(209) M(210) M(211) M(212) M(213) M(214) M(215) M(216) M(217) M(218) M(219) M(220) M(221) M(222) M(223) \
    M(224) M(225) M(226) M(227) M(228) M(229) M(230) M(231) M(232) M(233) M(234) M(235) M(236) M(237) M(238) M(239) \
    M(240) M(241) M(242) M(243) M(244) M(245) M(246) M(247) M(248) M(249) M(250) M(251) M(252) M(253) M(254) M(255)
#define HINA_WORDS_192_255_WITH(M, a) \
    M(a, 192) M(a, 193) M(a, 194) M(a, 195) M(a, 196) M(a, 197) M(a, 198) M(a, 199) M(a, 200) M(a, 201) M(a, 202) M(a, 203) M(a, 204) M(a, 205) M(a, 206) M(a, 207) \
    M(a, 208) M(a, 209) M(a, 210) M(a, 211) M(a, 212) M(a, 213) M(a, 214) M(a, 215) M(a, 216) M(a, 217) M(a, 218) M(a, 219) M(a, 220) M(a, 221) M(a, 222) M(a, 223) \
    M(a, 224) M(a, 225) M(a, 226) M(a, 227) M(a, 228) M(a, 229) M(a, 230) M(a, 231) M(a, 232) M(a, 233) M(a, 234) M(a, 235) M(a, 236) M(a, 237) M(a, 238) M(a, 239) \
    M(a, 240) M(a, 241) M(a, 242) M(a, 243) M(a, 244) M(a, 245) M(a, 246) M(a, 247) M(a, 248) M(a, 249) M(a, 250) M(a, 251) M(a, 252) M(a, 253) M(a, 254) M(a, 255)

#if HINA_WORDS == 64
#define HINA_FOR_EACH_WORD(M) HINA_WORDS_0_63(M)
#define HINA_FOR_EACH_WORD_WITH(M, a) HINA_WORDS_0_63_WITH(M, a)
#elif HINA_WORDS == 128
#define HINA_FOR_EACH_WORD(M) HINA_WORDS_0_63(M) HINA_WORDS_64_127(M)
#define HINA_FOR_EACH_WORD_WITH(M, a) HINA_WORDS_0_63_WITH(M, a) HINA_WORDS_64_127_WITH(M, a)
#elif HINA_WORDS == 256
#define HINA_FOR_EACH_WORD(M) HINA_WORDS_0_63(M) HINA_WORDS_64_127(M) HINA_WORDS_128_191(M) \
    HINA_WORDS_192_255(M)
#define HINA_FOR_EACH_WORD_WITH(M, a) HINA_WORDS_0_63_WITH(M, a) HINA_WORDS_64_127_WITH(M, a) \
    HINA_WORDS_128_191_WITH(M, a) HINA_WORDS_192_255_WITH(M, a)
#endif

// HINA_FOR_EACH_WORD_PAIR(M): M(p, 2p, 2p+1) for p in 0 .. HINA_WORDS/2 - 1 (register pairs).
#define HINA_WORD_PAIRS_0_31(M) \
    M(0, 0, 1) M(1, 2, 3) M(2, 4, 5) M(3, 6, 7) M(4, 8, 9) M(5, 10, 11) M(6, 12, 13) M(7, 14, 15) \
    M(8, 16, 17) M(9, 18, 19) M(10, 20, 21) M(11, 22, 23) M(12, 24, 25) M(13, 26, 27) M(14, 28, 29) M(15, 30, 31) \
    M(16, 32, 33) M(17, 34, 35) M(18, 36, 37) M(19, 38, 39) M(20, 40, 41) M(21, 42, 43) M(22, 44, 45) M(23, 46, 47) \
    M(24, 48, 49) M(25, 50, 51) M(26, 52, 53) M(27, 54, 55) M(28, 56, 57) M(29, 58, 59) M(30, 60, 61) M(31, 62, 63)
#define HINA_WORD_PAIRS_32_63(M) \
    M(32, 64, 65) M(33, 66, 67) M(34, 68, 69) M(35, 70, 71) M(36, 72, 73) M(37, 74, 75) M(38, 76, 77) M(39, 78, 79) \
    M(40, 80, 81) M(41, 82, 83) M(42, 84, 85) M(43, 86, 87) M(44, 88, 89) M(45, 90, 91) M(46, 92, 93) M(47, 94, 95) \
    M(48, 96, 97) M(49, 98, 99) M(50, 100, 101) M(51, 102, 103) M(52, 104, 105) M(53, 106, 107) M(54, 108, 109) M(55, 110, 111) \
    M(56, 112, 113) M(57, 114, 115) M(58, 116, 117) M(59, 118, 119) M(60, 120, 121) M(61, 122, 123) M(62, 124, 125) M(63, 126, 127)
#define HINA_WORD_PAIRS_64_95(M) \
    M(64, 128, 129) M(65, 130, 131) M(66, 132, 133) M(67, 134, 135) M(68, 136, 137) M(69, 138, 139) M(70, 140, 141) M(71, 142, 143) \
    M(72, 144, 145) M(73, 146, 147) M(74, 148, 149) M(75, 150, 151) M(76, 152, 153) M(77, 154, 155) M(78, 156, 157) M(79, 158, 159) \
    M(80, 160, 161) M(81, 162, 163) M(82, 164, 165) M(83, 166, 167) M(84, 168, 169) M(85, 170, 171) M(86, 172, 173) M(87, 174, 175) \
    M(88, 176, 177) M(89, 178, 179) M(90, 180, 181) M(91, 182, 183) M(92, 184, 185) M(93, 186, 187) M(94, 188, 189) M(95, 190, 191)
#define HINA_WORD_PAIRS_96_127(M) \
    M(96, 192, 193) M(97, 194, 195) M(98, 196, 197) M(99, 198, 199) M(100, 200, 201) M(101, 202, 203) M(102, 204, 205) M(103, 206, 207) \
    M(104, 208, 209) M(105, 210, 211) M(106, 212, 213) M(107, 214, 215) M(108, 216, 217) M(109, 218, 219) M(110, 220, 221) M(111, 222, 223) \
    M(112, 224, 225) M(113, 226, 227) M(114, 228, 229) M(115, 230, 231) M(116, 232, 233) M(117, 234, 235) M(118, 236, 237) M(119, 238, 239) \
    M(120, 240, 241) M(121, 242, 243) M(122, 244, 245) M(123, 246, 247) M(124, 248, 249) M(125, 250, 251) M(126, 252, 253) M(127, 254, 255)
#if HINA_WORDS == 64
#define HINA_FOR_EACH_WORD_PAIR(M) HINA_WORD_PAIRS_0_31(M)
#elif HINA_WORDS == 128
#define HINA_FOR_EACH_WORD_PAIR(M) HINA_WORD_PAIRS_0_31(M) HINA_WORD_PAIRS_32_63(M)
#elif HINA_WORDS == 256
#define HINA_FOR_EACH_WORD_PAIR(M) HINA_WORD_PAIRS_0_31(M) HINA_WORD_PAIRS_32_63(M) \
    HINA_WORD_PAIRS_64_95(M) HINA_WORD_PAIRS_96_127(M)
#endif

#if HINA_PAIRS == 8
#define HINA_FOR_EACH_PAIR(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#elif HINA_PAIRS == 16
#define HINA_FOR_EACH_PAIR(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) \
    M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)
#else
#error "HINA_PAIRS must be 8 or 16"
#endif

#if HINA_SKETCH_ROWS == 1
#define HINA_FOR_EACH_ROW(M) M(0)
#define HINA_FOR_EACH_ROW_WITH(M, a) M(a, 0)
#elif HINA_SKETCH_ROWS == 3
#define HINA_FOR_EACH_ROW(M) M(0) M(1) M(2)
#define HINA_FOR_EACH_ROW_WITH(M, a) M(a, 0) M(a, 1) M(a, 2)
#elif HINA_SKETCH_ROWS == 5
#define HINA_FOR_EACH_ROW(M) M(0) M(1) M(2) M(3) M(4)
#define HINA_FOR_EACH_ROW_WITH(M, a) M(a, 0) M(a, 1) M(a, 2) M(a, 3) M(a, 4)
#else
#error "HINA_SKETCH_ROWS must be 1, 3 or 5"
#endif

#endif  // _HINA_LANES_P4_
