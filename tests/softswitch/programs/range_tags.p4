// Range matches whose effect shows in the frame: one table on a byte-aligned field (the 16-bit
// EtherType) and one on a field that is not (the 12-bit id of a tag after EtherType 0x8100).
// The matched action writes the egress port and a mark into the frame. Used by
// bmv2_tests/test_differential.py (range bounds written both ways to BMv2 and the embedded
// target), and by the generated differential test like every program of this folder.
#include <core.p4>
#include <v1model.p4>

const bit<16> TAG_ETHER_TYPE = 0x8100;

header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header tag_h {
    bit<4>  pri;
    bit<12> id;
    bit<16> ether_type;
}

struct headers_t {
    ethernet_h ethernet;
    tag_h      tag;
}

struct meta_t { }

parser RangeParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                   inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            TAG_ETHER_TYPE: parse_tag;
            default: accept;
        }
    }
    state parse_tag {
        pkt.extract(hdr.tag);
        transition accept;
    }
}

control RangeVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control RangeIngress(inout headers_t hdr, inout meta_t meta,
                     inout standard_metadata_t std) {
    action drop() { mark_to_drop(std); }
    // port: the egress port; mark: written over the source address
    action mark_ether_type(bit<9> port, bit<48> mark) {
        std.egress_spec = port;
        hdr.ethernet.src = mark;
    }
    // port: the egress port; pri: written into the tag
    action mark_tag(bit<9> port, bit<4> pri) {
        std.egress_spec = port;
        hdr.tag.pri = pri;
    }

    table ether_type_ranges {
        key = { hdr.ethernet.ether_type: range; }
        actions = { mark_ether_type; drop; }
        default_action = drop();
        size = 32;
    }
    table tag_id_ranges {
        key = { hdr.tag.id: range; }
        actions = { mark_tag; drop; }
        default_action = drop();
        size = 32;
    }

    apply {
        if (hdr.tag.isValid()) {
            tag_id_ranges.apply();
        } else {
            ether_type_ranges.apply();
        }
    }
}

control RangeEgress(inout headers_t hdr, inout meta_t meta,
                    inout standard_metadata_t std) {
    apply { }
}

control RangeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control RangeDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.tag);
    }
}

V1Switch(RangeParser(), RangeVerify(), RangeIngress(), RangeEgress(), RangeChecksum(),
         RangeDeparser()) main;
