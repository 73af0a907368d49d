// THC LUT-SUM: map each 4-bit table index to its table value.
//
// One exact table per coordinate (2 * HINA_WORDS tables of HINA_LUTS * 16 entries), keyed on
// (job lut_id, index), so the table (and g) is run-time configuration installed by the
// controller (hina.pipeline.lut_entries). A per-byte table (HINA_WORDS tables, 256 entries per
// LUT each) would halve the lookups per packet but multiply the entries by 8; see
// docs/dataplane.md. Each table is applied once per packet.
#ifndef _HINA_LUT_P4_
#define _HINA_LUT_P4_

#include "headers.p4"

control ThcLut(inout headers_t hdr, inout metadata_t meta) {

    action lut_miss() {
        meta.lut_miss = 1;
    }

// Written by the controller: for each LUT id, 16 entries index -> value per table.
#define HINA_LUT_TABLES(i) \
    action set_hi_##i(bit<16> value) { meta.thc.hi##i = value; } \
    action set_lo_##i(bit<16> value) { meta.thc.lo##i = value; } \
    table lut_hi_##i { \
        key = { meta.lut_id : exact @name("lut_id"); hdr.thc.hi##i : exact @name("index"); } \
        actions = { set_hi_##i; @defaultonly lut_miss; } \
        size = HINA_LUTS * 16; \
        default_action = lut_miss(); \
    } \
    table lut_lo_##i { \
        key = { meta.lut_id : exact @name("lut_id"); hdr.thc.lo##i : exact @name("index"); } \
        actions = { set_lo_##i; @defaultonly lut_miss; } \
        size = HINA_LUTS * 16; \
        default_action = lut_miss(); \
    }
    HINA_FOR_EACH_WORD(HINA_LUT_TABLES)

#define HINA_LUT_APPLY(i) \
    lut_hi_##i.apply(); \
    lut_lo_##i.apply(); \
    hdr.words.w##i = meta.thc.hi##i ++ meta.thc.lo##i;

    apply {
        hdr.words.setValid();
        HINA_FOR_EACH_WORD(HINA_LUT_APPLY)
        if (meta.lut_miss == 1) {
            meta.reason = REASON_BAD_JOB;
        }
    }
}

#endif  // _HINA_LUT_P4_
