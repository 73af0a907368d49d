// A tiny TNA program with the names hina-ctl reads on Tofino (p4/tna/hina_tna.p4's
// HinaTnaIngress.reason_counter, a 32-bit lane register, a pair register like slot_bitmap):
// bf-p4c compiles and assembles it in seconds, for tests/controller/test_tofino_ctl.py.
#include <core.p4>
#include <tna.p4>

header word_h { bit<32> value; }
struct headers_t { word_h word; }
struct metadata_t { bit<8> reason; }
struct pair_t { bit<32> lo; bit<32> hi; }

parser TinyIngressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                         out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        pkt.extract(hdr.word);
        meta.reason = hdr.word.value[7:0];
        transition accept;
    }
}

control HinaTnaIngress(inout headers_t hdr, inout metadata_t meta,
                       in ingress_intrinsic_metadata_t ig_intr_md,
                       in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                       inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                       inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Counter<bit<32>, bit<8>>(16, CounterType_t.PACKETS) reason_counter;
    Register<bit<32>, bit<8>>(256) lane_0;
    RegisterAction<bit<32>, bit<8>, bit<32>>(lane_0) lane_0_sum = {
        void apply(inout bit<32> cell, out bit<32> result) {
            cell = cell + hdr.word.value;
            result = cell;
        }
    };
    Register<pair_t, bit<8>>(16) slot_bitmap;
    RegisterAction<pair_t, bit<8>, bit<32>>(slot_bitmap) slot_bitmap_or = {
        void apply(inout pair_t cell, out bit<32> result) {
            cell.lo = cell.lo | hdr.word.value;
            result = cell.lo;
        }
    };

    // Sends a packet to port.
    action forward(PortId_t port) { ig_tm_md.ucast_egress_port = port; }
    table forwarding {
        key = { ig_intr_md.ingress_port : exact; }
        actions = { forward; NoAction; }
        size = 64;
        default_action = NoAction;
    }
    apply {
        hdr.word.value = lane_0_sum.execute(meta.reason);
        slot_bitmap_or.execute(meta.reason);
        reason_counter.count(meta.reason);
        forwarding.apply();
    }
}

control TinyIngressDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                            in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply { pkt.emit(hdr); }
}

parser TinyEgressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                        out egress_intrinsic_metadata_t eg_intr_md) {
    state start { pkt.extract(eg_intr_md); transition accept; }
}

control HinaTnaEgress(inout headers_t hdr, inout metadata_t meta,
                      in egress_intrinsic_metadata_t eg_intr_md,
                      in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                      inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                      inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply { }
}

control TinyEgressDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                           in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply { pkt.emit(hdr); }
}

Pipeline(TinyIngressParser(), HinaTnaIngress(), TinyIngressDeparser(),
         TinyEgressParser(), HinaTnaEgress(), TinyEgressDeparser()) pipe;
Switch(pipe) main;
