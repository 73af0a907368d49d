/* features.p4: a small v1model program that makes every STF command observable.
 *
 * Ingress:
 *   forward   (exact dstAddr, direct counter forward_hits): set_port / set_mcast /
 *             mirror_and_forward / drop (default). Written by STF `add` / `setdefault`.
 *   classify  (ternary etherType): set_src rewrites srcAddr. Default NoAction.
 *   magic     register: frames of EtherType 0x88B5 get magic[0] as their srcAddr.
 *   last_type register: last_type[0] keeps the EtherType of the last frame.
 *   rx_frames counter (packets and bytes), indexed by ingress port.
 * Egress:
 *   multicast replicas carry their egress_rid in the low 16 bits of srcAddr;
 *   I2E clones leave with EtherType 0xC10E.
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_MAGIC = 0x88B5;
const bit<16> TYPE_CLONED = 0xC10E;
const bit<32> PKT_INSTANCE_TYPE_INGRESS_CLONE = 1;   // BMv2's instance_type of an I2E clone
const bit<32> PORT_COUNT = 16;                       // size of the per-port counter

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct headers_t {
    ethernet_t ethernet;
}

struct metadata_t {
    /* empty */
}

parser FeatureParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control FeatureVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FeatureIngress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    register<bit<48>>(1) magic;
    register<bit<16>>(4) last_type;
    counter(PORT_COUNT, CounterType.packets_and_bytes) rx_frames;
    direct_counter(CounterType.packets_and_bytes) forward_hits;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* port: the egress port. */
    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    /* grp: the multicast group (mc_mgrp_create). */
    action set_mcast(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }

    /* port: the egress port; session: the clone session (mirroring_add). */
    action mirror_and_forward(bit<9> port, bit<32> session) {
        standard_metadata.egress_spec = port;
        clone(CloneType.I2E, session);
    }

    /* mac: the new source address. */
    action set_src(bit<48> mac) {
        hdr.ethernet.srcAddr = mac;
    }

    table forward {
        key = {
            hdr.ethernet.dstAddr: exact;
        }
        actions = {
            set_port;
            set_mcast;
            mirror_and_forward;
            drop;
        }
        counters = forward_hits;
        size = 64;
        default_action = drop();
    }

    table classify {
        key = {
            hdr.ethernet.etherType: ternary;
        }
        actions = {
            set_src;
            NoAction;
        }
        size = 64;
        default_action = NoAction();
    }

    apply {
        rx_frames.count((bit<32>)standard_metadata.ingress_port);
        last_type.write(0, hdr.ethernet.etherType);
        if (hdr.ethernet.etherType == TYPE_MAGIC) {
            magic.read(hdr.ethernet.srcAddr, 0);
        }
        forward.apply();
        classify.apply();
    }
}

control FeatureEgress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_INGRESS_CLONE) {
            hdr.ethernet.etherType = TYPE_CLONED;
        } else if (standard_metadata.egress_rid != 0) {
            hdr.ethernet.srcAddr[15:0] = standard_metadata.egress_rid;
        }
    }
}

control FeatureComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FeatureDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
    }
}

V1Switch(FeatureParser(), FeatureVerify(), FeatureIngress(), FeatureEgress(),
         FeatureComputeChecksum(), FeatureDeparser()) main;
