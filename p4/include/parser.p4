// Parser, checksum controls and deparser.
#ifndef _HINA_PARSER_P4_
#define _HINA_PARSER_P4_

#include "headers.p4"

parser HinaParser(packet_in packet,
                  out headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    // A later fragment (offset != 0) carries no UDP header: its first bytes are another
    // fragment's payload, never parsed as one (the TNA program selects the same).
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (IPV4_IHL_NO_OPTIONS, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            HINA_UDP_PORT_BASE &&& HINA_UDP_PORT_MASK: parse_hina;
            default: accept;
        }
    }

    // Unknown versions, types and ops stop here; ingress drops them as MALFORMED.
    state parse_hina {
        packet.extract(hdr.hina);
        transition select(hdr.hina.version, hdr.hina.msg_type, hdr.hina.op) {
            (HINA_VERSION, MSG_AGGREGATE, OP_LUT_SUM): parse_thc;
            (HINA_VERSION, MSG_AGGREGATE, OP_SUM): parse_words;
            (HINA_VERSION, MSG_AGGREGATE, OP_MAX): parse_words;
            (HINA_VERSION, MSG_AGGREGATE, OP_OR): parse_words;
            (HINA_VERSION, MSG_AGGREGATE, OP_BLOCK_SUM): parse_block_words;
            (HINA_VERSION, MSG_AGGREGATE, OP_BLOCK_SKIP): parse_block;
            (HINA_VERSION, MSG_PAIRS, _): parse_pairs;
            (HINA_VERSION, MSG_HARVEST, _): parse_harvest;
            (HINA_VERSION, MSG_RESET, _): parse_harvest;
            default: accept;
        }
    }

    state parse_thc {
        packet.extract(hdr.thc);
        transition accept;
    }

    // Block-sparse: the block header, then the lanes of a nonzero block.
    state parse_block_words {
        packet.extract(hdr.block);
        transition parse_words;
    }

    // Block-sparse: the block header alone (the sender's block is zero).
    state parse_block {
        packet.extract(hdr.block);
        transition accept;
    }

    state parse_words {
        packet.extract(hdr.words);
        transition accept;
    }

    state parse_pairs {
        packet.extract(hdr.pairs);
        transition accept;
    }

    state parse_harvest {
        packet.extract(hdr.harvest);
        transition accept;
    }
}

// The IPv4 header without its checksum field, in wire order: what the header checksum covers,
// verified on the way in and computed on the way out.
#define IPV4_HEADER_FIELDS \
    { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, \
      hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, \
      hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr }

// The IPv4 header checksum (a header of 20 bytes: the parser takes no options): a wrong one
// sets standard_metadata.checksum_error, which Validate refuses as MALFORMED, as the TNA program
// does (a header corrupted after the FCS; the UDP checksum covers the addresses, the protocol
// and the length, but not the TTL, the flags or the fragment offset).
control HinaVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(
            hdr.ipv4.isValid(),
            IPV4_HEADER_FIELDS,
            hdr.ipv4.hdr_checksum,
            HashAlgorithm.csum16);
    }
}

control HinaComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            IPV4_HEADER_FIELDS,
            hdr.ipv4.hdr_checksum,
            HashAlgorithm.csum16);
    }
}

control HinaDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.hina);
        packet.emit(hdr.block);
        packet.emit(hdr.harvest);
        packet.emit(hdr.thc);
        packet.emit(hdr.pairs);
        packet.emit(hdr.words);
    }
}

#endif  // _HINA_PARSER_P4_
