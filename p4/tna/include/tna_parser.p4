// Parsers and deparsers of the TNA program.
//
// Block rotation: the ingress parser always extracts the first payload block into the *_a
// header (the block the lanes of this pass work on) and the deparser emits *_b before *_a. So
// a packet recirculated after pass 0 comes back with block 1 in front (in words_a) and block 0's
// results behind it (in words_b); after the last pass the emit order (words_b, words_a) is the
// wire order again. THC: pass 0 emits block 0's results (words_a, 4 bytes per byte) and the
// untouched THC block 1 (thc_b); pass 1 extracts them as words_b and thc_a. PAIRS: the pair in
// work is emitted behind the others, so pass p works on pair p and HINA_PAIRS passes restore the
// order.
//
// Checksums (v3 makes the UDP checksum mandatory): the IPv4 header checksum is verified by the
// parser's Checksum unit and rewritten by the deparser. A message's UDP checksum is verified by
// a second unit: a worker's message is parsed whole (every lane, index and pair is extracted
// into headers, and a parser checksum unit sums extracted fields only, in the states that
// extract them), so the unit adds the pseudo-header, the UDP and HINA headers and the payload
// as each state extracts them and verifies in the state that extracts the last of them
// (udp_err; TnaValidate refuses a wrong sum as BAD_CHECKSUM, a zero field as missing).
// verify() is true when the sum is wrong (bf-p4c's reading: the unit's error bit). ipv4_err and
// udp_err are written in the OR form bf-p4c takes for a field written more than once for a
// packet (its initial false, then this); a direct assignment after the initial one is refused. The
// pseudo-header's zero byte is a constant, which bf-p4c leaves out: the protocol byte is summed
// by its place in the IPv4 header, an odd byte, so as the low byte of its word, as the
// pseudo-header has it. Replies get a correct UDP checksum: the ingress deparser sums the
// payload into the bridged header, the egress deparser adds the pseudo-header and the
// rewritten headers to it.
#ifndef _HINA_TNA_PARSER_P4_
#define _HINA_TNA_PARSER_P4_

#include "tna_headers.p4"

// The recirculation port of pipe 0 (Tofino 1: 68; Tofino 2: 6).
#ifndef TNA_RECIRC_PORT
#if __TARGET_TOFINO__ == 2
#define TNA_RECIRC_PORT 6
#else
#define TNA_RECIRC_PORT 68
#endif
#endif

// Extra reply kind: to the recirculation port for the next pass.
#define REPLY_RECIRCULATE 4

parser HinaTnaIngressParser(packet_in pkt,
                            out tna_headers_t hdr,
                            out tna_ingress_metadata_t meta,
                            out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;
    Checksum() udp_checksum;       // a worker's message: pseudo-header, UDP, HINA, payload

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.reason = REASON_NONE;
        meta.reply = REPLY_NONE;
        meta.pass = 0;
        meta.recirculated = 0;
        meta.verdict = 0;
        meta.ipv4_bad = 0;
        meta.job_miss = 0;
        meta.worker_miss = 0;
        meta.slot_miss = 0;
        meta.new_round = 0;
        meta.stale = 0;
        meta.in_slot = 0;
        meta.lut_miss = 0;
        meta.pair_add = 0;
        meta.ipv4_err = false;         // both accumulated: x_err = verify() || x_err (only a
        meta.udp_err = false;          // HINA message, so parse_ipv4 and a payload, is checked)
#if TNA_BLOCK_SPARSE
        meta.block_gap = 1;            // only a block-sparse packet's is computed (TnaValidate)
        meta.block_check = 0;
        meta.block_bad = 0;
        meta.seq_order = 0;            // TnaSlotBitmap's gate
#endif
        transition select(ig_intr_md.ingress_port) {
            TNA_RECIRC_PORT: parse_pass;
            default: parse_ethernet;
        }
    }

    // A recirculated packet: only this program sends them, always IPv4/UDP/HINA.
    state parse_pass {
        pkt.extract(hdr.pass);
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.hina);
        meta.pass = hdr.pass.pass;
        meta.recirculated = 1;
        // Pass 0's lane selection inputs, for the same choice in this pass.
        meta.new_round = hdr.pass.new_round;
        meta.worker_id = hdr.pass.worker_id;
        meta.bitmap_old = hdr.pass.bitmap_old;
        meta.reply = hdr.pass.reply;
        meta.in_slot = 1;
        transition select(hdr.hina.msg_type, hdr.hina.op) {
            (MSG_AGGREGATE, OP_LUT_SUM): parse_thc_rest;
#if TNA_BLOCK_SPARSE
            // Pass 0 gave a BLOCK_SKIP its zero blocks (TnaBlockSkip): both ops carry words now.
            (MSG_AGGREGATE, OP_BLOCK_SUM): parse_block_words;
            (MSG_AGGREGATE, OP_BLOCK_SKIP): parse_block_words;
#endif
            (MSG_AGGREGATE, _): parse_words;
            (MSG_PAIRS, _): parse_pairs;
            default: accept;
        }
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        meta.ipv4_err = ipv4_checksum.verify() || meta.ipv4_err;
        udp_checksum.add({hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol});
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (IPV4_IHL_NO_OPTIONS, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        udp_checksum.add(hdr.udp);
        udp_checksum.add({hdr.udp.length});      // the pseudo-header's UDP length
        transition select(hdr.udp.dst_port) {
            HINA_UDP_PORT_BASE &&& HINA_UDP_PORT_MASK: parse_hina;
            default: accept;
        }
    }

    state parse_hina {
        pkt.extract(hdr.hina);
        udp_checksum.add(hdr.hina);
        transition select(hdr.hina.msg_type, hdr.hina.op) {
            (MSG_AGGREGATE, OP_LUT_SUM): parse_thc;
#if TNA_BLOCK_SPARSE
            (MSG_AGGREGATE, OP_BLOCK_SUM): parse_block_words;
            (MSG_AGGREGATE, OP_BLOCK_SKIP): parse_block;
#endif
            (MSG_AGGREGATE, _): parse_words;
            (MSG_PAIRS, _): parse_pairs;
            (MSG_HARVEST, _): parse_harvest;
            (MSG_RESET, _): parse_harvest;
            default: accept;
        }
    }

    // Pass 0's lanes; a recirculated packet's too, whose udp_err this sets from a check of
    // nothing (its unit added no field): harmless, as TnaValidate runs in pass 0 only.
    state parse_words {
        pkt.extract(hdr.words_a);
        pkt.extract(hdr.words_b);
        udp_checksum.add(hdr.words_a);
        udp_checksum.add(hdr.words_b);
        meta.udp_err = udp_checksum.verify() || meta.udp_err;
        transition accept;
    }

#if TNA_BLOCK_SPARSE
    // Block-sparse: the block header, then the lanes of a nonzero block (BLOCK_SUM) ...
    state parse_block_words {
        pkt.extract(hdr.block);
        udp_checksum.add(hdr.block);
        transition parse_words;
    }

    // ... or the block header alone (BLOCK_SKIP: the sender's block is zero).
    state parse_block {
        pkt.extract(hdr.block);
        udp_checksum.add(hdr.block);
        meta.udp_err = udp_checksum.verify() || meta.udp_err;
        transition accept;
    }
#endif

    state parse_thc {
        pkt.extract(hdr.thc_a);
        pkt.extract(hdr.thc_b);
        // One list: a block is TNA_LANES bytes, odd at 1 lane, and the unit sums 16-bit words
        // of the packet (the embedded target pads each list to a word: one list keeps both
        // sums the packet's).
        udp_checksum.add({hdr.thc_a, hdr.thc_b});
        meta.udp_err = udp_checksum.verify() || meta.udp_err;
        transition accept;
    }

    // Pass 1 of THC: block 0's results, then THC block 1.
    state parse_thc_rest {
        pkt.extract(hdr.words_b);
        pkt.extract(hdr.thc_a);
        transition accept;
    }

    state parse_pairs {
        pkt.extract(hdr.pair);
        pkt.extract(hdr.pair_rest);
        udp_checksum.add(hdr.pair);
        udp_checksum.add(hdr.pair_rest);
        meta.udp_err = udp_checksum.verify() || meta.udp_err;
        transition accept;
    }

    state parse_harvest {
        pkt.extract(hdr.harvest);
        transition accept;
    }
}

control HinaTnaIngressDeparser(packet_out pkt,
                               inout tna_headers_t hdr,
                               in tna_ingress_metadata_t meta,
                               in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum;
    Checksum() payload_checksum;

#define TNA_SUM_WORD_B(i) hdr.words_b.w##i,
#define TNA_SUM_WORD_A(i) hdr.words_a.w##i,
#if TNA_BLOCK_SPARSE
// A block-sparse RESULT's block header is payload too (behind the HINA header, which egress
// sums). A header that is not valid adds nothing: a reply of another op has no block header.
#define TNA_BLOCK_HEADER_SUM hdr.block.block, hdr.block.next,
#else
#define TNA_BLOCK_HEADER_SUM
#endif
    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
                hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        }
        if (hdr.bridge.isValid()) {
            // A reply's payload is the two result blocks (the last pass's words_b, words_a),
            // behind the block header of a block-sparse RESULT.
            hdr.bridge.payload_sum = payload_checksum.update({
                TNA_BLOCK_HEADER_SUM
                TNA_FOR_EACH_LANE(TNA_SUM_WORD_B)
                TNA_FOR_EACH_LANE(TNA_SUM_WORD_A)
                16w0});
        }
        pkt.emit(hdr);
    }
}

parser HinaTnaEgressParser(packet_in pkt,
                           out tna_headers_t hdr,
                           out tna_egress_metadata_t meta,
                           out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);
        meta.payload_sum = 0;
        transition select(hdr.bridge.reply) {
            REPLY_RECIRCULATE: parse_pass;
            default: parse_reply;
        }
    }

    // On its way to the recirculation port: passed through untouched (payload unparsed).
    state parse_pass {
        pkt.extract(hdr.pass);
        transition accept;
    }

    // A reply: the headers egress rewrites; the payload stays unparsed (its sum is bridged).
    state parse_reply {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.hina);
        transition accept;
    }
}

control HinaTnaEgressDeparser(packet_out pkt,
                              inout tna_headers_t hdr,
                              in tna_egress_metadata_t meta,
                              in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;
    Checksum() udp_checksum;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
                hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
            // Pseudo-header, UDP header (checksum field 0 before this), HINA header, payload.
            hdr.udp.checksum = udp_checksum.update({
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length,
                hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length,
                hdr.hina.version, hdr.hina.msg_type, hdr.hina.op, hdr.hina.flags, hdr.hina.count,
                hdr.hina.job_id, hdr.hina.pool, hdr.hina.slot, hdr.hina.seq,
                hdr.hina.generation, hdr.hina.reserved,
                meta.payload_sum}, true);   // zeros_as_ones: a computed 0 goes out as 0xFFFF
        }
        pkt.emit(hdr);
    }
}

#endif  // _HINA_TNA_PARSER_P4_
