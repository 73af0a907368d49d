// P4Runtime test program: CPU port packet I/O through @controller_header headers, one table per
// match kind, a direct counter, an indexed counter, a register and a digest.
// Used by tests/softswitch/test_p4runtime*.py; CPU_PORT must match the tests' Switch(cpu_port=).
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;
const bit<16> LEARN_ETHER_TYPE = 0x1234;   // frames of this type raise a learn_t digest

@controller_header("packet_in")
header packet_in_h {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_h {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers_t {
    packet_out_h cpu_out;
    packet_in_h  cpu_in;
    ethernet_h   ethernet;
}

struct meta_t {
    bit<8> acl_class;
}

struct learn_t {
    bit<48> src;
    bit<9>  port;
}

parser P4rtParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t std) {
    state start {
        transition select(std.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.cpu_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control P4rtVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control P4rtIngress(inout headers_t hdr, inout meta_t meta,
                    inout standard_metadata_t std) {
    counter(8, CounterType.packets_and_bytes) port_packets;
    register<bit<32>>(8) last_ether_type;
    direct_counter(CounterType.packets_and_bytes) dmac_hits;

    action drop() { mark_to_drop(std); }
    // port: the egress port
    action forward(bit<9> port) { std.egress_spec = port; }
    action send_to_cpu() {
        std.egress_spec = CPU_PORT;
        hdr.cpu_in.setValid();
        hdr.cpu_in.ingress_port = std.ingress_port;
        hdr.cpu_in._pad = 0;
    }
    // group: the multicast group
    action flood(bit<16> group) { std.mcast_grp = group; }
    // acl_class: the class recorded in metadata
    action set_class(bit<8> acl_class) { meta.acl_class = acl_class; }

    table dmac_t {
        key = { hdr.ethernet.dst: exact; }
        actions = { forward; drop; send_to_cpu; flood; NoAction; }
        default_action = NoAction();
        counters = dmac_hits;
        size = 64;
    }
    table smac_t {
        key = { hdr.ethernet.src: lpm; }
        actions = { set_class; NoAction; }
        default_action = NoAction();
        size = 64;
    }
    table acl_t {
        key = {
            hdr.ethernet.ether_type: ternary;
            std.ingress_port: optional;
        }
        actions = { set_class; drop; NoAction; }
        default_action = NoAction();
        size = 64;
    }
    table type_range_t {
        key = { hdr.ethernet.ether_type: range; }
        actions = { set_class; @defaultonly NoAction; }
        default_action = NoAction();
        size = 64;
    }

    apply {
        if (hdr.cpu_out.isValid()) {
            std.egress_spec = hdr.cpu_out.egress_port;
            hdr.cpu_out.setInvalid();
            return;
        }
        if (std.ingress_port < 8) {
            port_packets.count((bit<32>) std.ingress_port);
            last_ether_type.write((bit<32>) std.ingress_port, (bit<32>) hdr.ethernet.ether_type);
        }
        if (hdr.ethernet.ether_type == LEARN_ETHER_TYPE) {
            digest<learn_t>(1, { hdr.ethernet.src, std.ingress_port });
        }
        type_range_t.apply();
        acl_t.apply();
        smac_t.apply();
        dmac_t.apply();
    }
}

control P4rtEgress(inout headers_t hdr, inout meta_t meta,
                   inout standard_metadata_t std) {
    apply { }
}

control P4rtChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control P4rtDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.cpu_in);
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(P4rtParser(), P4rtVerify(), P4rtIngress(), P4rtEgress(), P4rtChecksum(),
         P4rtDeparser()) main;
