// Building replies: addresses, lengths and header fields of results, acknowledgements,
// harvest data and notices; per-replica destination rewrite in egress. Every reply but the
// NOTICE keeps the request's generation (the job's current one: admission let it through).
#ifndef _HINA_EGRESS_REWRITE_P4_
#define _HINA_EGRESS_REWRITE_P4_

#include "headers.p4"

// End of ingress: turn the request into its reply, or drop it. Egress writes the reply's UDP
// checksum once its addresses are final (UpdateUdpChecksum).
control Reply(inout headers_t hdr,
              inout metadata_t meta,
              inout standard_metadata_t standard_metadata) {

    // Unicast back to the sender: swap the addresses.
    action reply_to_sender() {
        mac_addr_t mac = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        ipv4_addr_t ip = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
        hdr.ipv4.src_addr = ip;
        bit<16> port = hdr.udp.dst_port;
        hdr.udp.dst_port = hdr.udp.src_port;
        hdr.udp.src_port = port;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    // Multicast to the job's workers: the switch's address becomes the source; egress writes
    // each replica's destination (ReplicaRewrite).
    action reply_to_job() {
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.udp.src_port = hdr.udp.dst_port;
        standard_metadata.mcast_grp = meta.mcast_grp;
    }

    apply {
        if (meta.reply == REPLY_NONE) {
            mark_to_drop(standard_metadata);
        } else {
            bit<16> payload = 0;
            if (meta.reply == REPLY_NOTICE) {
                // Header only, so never larger than its cause (no amplification): the reason
                // in op, the job's current generation; job, slot, pool and seq echoed.
                hdr.hina.msg_type = MSG_NOTICE;
                hdr.hina.op = meta.reason;
                hdr.hina.flags = 0;
                hdr.hina.count = 0;
                hdr.hina.generation = meta.generation;
                hdr.harvest.setInvalid();
                hdr.thc.setInvalid();
                hdr.pairs.setInvalid();
                hdr.words.setInvalid();
                hdr.block.setInvalid();
            } else if (hdr.hina.msg_type == MSG_AGGREGATE) {
                hdr.hina.msg_type = MSG_RESULT;
                hdr.hina.flags = meta.result_flags
                                 | ((meta.reply == REPLY_UNICAST) ? (bit<8>)FLAG_RETRANSMIT : 8w0);
                hdr.hina.count = meta.count;
                hdr.thc.setInvalid();
                payload = 4 * HINA_WORDS;
                if (hdr.block.isValid()) {
                    // Block-sparse: the block summed and the next one the slot aggregates.
                    hdr.hina.op = OP_BLOCK_SUM;
                    hdr.block.block = meta.block_index;
                    hdr.block.next = meta.block_next;
                    payload = HINA_BLOCK_BYTES + 4 * HINA_WORDS;
                }
            } else if (hdr.hina.msg_type == MSG_PAIRS) {
                hdr.hina.msg_type = MSG_PAIRS_ACK;
                hdr.hina.flags = (meta.lane_overflow == 1) ? (bit<8>)FLAG_OVERFLOW : 8w0;
                hdr.pairs.setInvalid();
            } else if (hdr.hina.msg_type == MSG_HARVEST) {
                hdr.hina.msg_type = MSG_HARVEST_DATA;
                payload = HINA_HARVEST_BYTES + 4 * HINA_WORDS;
            } else {
                payload = HINA_HARVEST_BYTES;   // RESET is acknowledged with itself
            }
            hdr.udp.length = UDP_BYTES + HINA_HEADER_BYTES + payload;
            hdr.ipv4.total_len = IPV4_BYTES + hdr.udp.length;
            if (meta.reply == REPLY_MULTICAST) {
                reply_to_job();
            } else {
                reply_to_sender();
            }
        }
    }
}

// Egress: give each multicast replica its worker's addresses.
control ReplicaRewrite(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {

    // Parameters: the worker's MAC, IPv4 address and UDP port.
    action set_worker_address(mac_addr_t dst_mac, ipv4_addr_t dst_addr, bit<16> dst_port) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.dst_port = dst_port;
    }

    action drop_replica() {
        mark_to_drop(standard_metadata);
    }

    // Written by the controller: one entry per worker of each job, keyed on the replica id it
    // gave the worker in the job's multicast group (rid = job_id * 64 + worker_id + 1).
    table replica_rewrite {
        key = {
            standard_metadata.egress_rid: exact @name("egress_rid");
        }
        actions = {
            set_worker_address;
            @defaultonly drop_replica;
        }
        size = HINA_REPLICA_TABLE_SIZE;
        default_action = drop_replica();
    }

    apply {
        replica_rewrite.apply();
    }
}

#endif  // _HINA_EGRESS_REWRITE_P4_
