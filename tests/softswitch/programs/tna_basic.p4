// A small TNA program for the embedded target's TNA pipeline (tests/softswitch/test_tna.py):
// the intrinsic metadata a Tofino parser reads, Register/RegisterAction (a bit<32> cell with an
// initial value, a struct cell), Hash (CRC32 into 16 bits), Counter, unicast, multicast with
// replication ids, drop_ctl in ingress and egress. bf-p4c --target tofino --arch tna compiles it.
#include <core.p4>
#include <tna.p4>

header ethernet_h { bit<48> dst; bit<48> src; bit<16> ether_type; }
header op_h {
    bit<8>  op;        // 1: unicast to ingress_port + 1, 2: multicast group 5, 3: drop
    bit<8>  idx;       // register and counter index
    bit<32> value;
    bit<32> acc;       // acc[idx] after adding value (acc starts at 5)
    bit<32> pairs;     // how many packets updated pairs[idx] (its .hi), .lo ORs value
    bit<16> hash;      // CRC32({value, idx})[15:0]
    bit<16> eport;     // egress: the egress port
    bit<16> rid;       // egress: the replication id
}
struct headers_t { ethernet_h eth; op_h op; }
struct metadata_t { }
struct pair_t { bit<32> lo; bit<32> hi; }

parser IgParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            0x88b5: parse_op;
            default: accept;
        }
    }
    state parse_op { pkt.extract(hdr.op); transition accept; }
}

control Ig(inout headers_t hdr, inout metadata_t meta,
           in ingress_intrinsic_metadata_t ig_intr_md,
           in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
           inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
           inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Register<bit<32>, bit<8>>(16, 5) acc;
    RegisterAction<bit<32>, bit<8>, bit<32>>(acc) acc_add = {
        void apply(inout bit<32> cell, out bit<32> result) {
            cell = cell + hdr.op.value;
            result = cell;
        }
    };
    Register<pair_t, bit<8>>(16) pairs;
    RegisterAction<pair_t, bit<8>, bit<32>>(pairs) pairs_update = {
        void apply(inout pair_t cell, out bit<32> result) {
            cell.lo = cell.lo | hdr.op.value;
            cell.hi = cell.hi + 1;
            result = cell.hi;
        }
    };
    Hash<bit<16>>(HashAlgorithm_t.CRC32) crc;
    Counter<bit<32>, bit<8>>(16, CounterType_t.PACKETS_AND_BYTES) ops;

    action to_next_port() { ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port + 1; }
    action to_group() { ig_tm_md.mcast_grp_a = 5; }
    action drop() { ig_dprsr_md.drop_ctl = 1; }
    table dispatch {
        key = { hdr.op.op : exact; }
        actions = { to_next_port; to_group; drop; NoAction; }
        const entries = { 1 : to_next_port(); 2 : to_group(); 3 : drop(); }
        default_action = NoAction;
        size = 8;
    }
    apply {
        if (hdr.op.isValid()) {
            hdr.op.acc = acc_add.execute(hdr.op.idx);
            hdr.op.pairs = pairs_update.execute(hdr.op.idx);
            hdr.op.hash = crc.get({hdr.op.value, hdr.op.idx});
            ops.count(hdr.op.idx);
            dispatch.apply();
        }
    }
}

control IgDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                   in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply { pkt.emit(hdr); }
}

parser EgParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.eth);
        pkt.extract(hdr.op);
        transition accept;
    }
}

control Eg(inout headers_t hdr, inout metadata_t meta,
           in egress_intrinsic_metadata_t eg_intr_md,
           in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
           inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
           inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply {
        hdr.op.eport = (bit<16>) eg_intr_md.egress_port;
        hdr.op.rid = eg_intr_md.egress_rid;
        if (eg_intr_md.egress_rid == 3) {
            eg_dprsr_md.drop_ctl = 1;      // the group's third replica is dropped in egress
        }
    }
}

control EgDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                   in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply { pkt.emit(hdr); }
}

Pipeline(IgParser(), Ig(), IgDeparser(), EgParser(), Eg(), EgDeparser()) pipe;
Switch(pipe) main;
