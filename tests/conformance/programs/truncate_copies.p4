// truncate() as BMv2 (simple_switch) keeps it: the length sticks to the packet instance, the
// smallest of its calls wins (ingress's and egress's alike: bm::Packet::truncate keeps the
// minimum), 0 cuts the frame to nothing (no frame a port can carry), and a copy made from
// the packet starts uncut: multicast replicas (clone_with_phv), I2E and E2E clones, a
// resubmitted or recirculated packet (its frame is the one deparsed, whole). Found by the
// random differential test (bench/p4_differential.py, seeds 130000-130196 of the generator's
// truncate: 27 of 197 programs differed before the embedded target kept these rules).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ctl_t { bit<8> mode; bit<8> a; bit<8> b; bit<8> pass; }
struct headers_t { ethernet_t eth; ctl_t ctl; }
struct meta_t { @field_list(1) bit<8> pass; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.ctl); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        if (hdr.ctl.mode == 1) {            // ingress a, then egress b: the smaller
            truncate((bit<32>) hdr.ctl.a);
        } else if (hdr.ctl.mode == 2) {     // two calls in ingress: the smaller
            truncate((bit<32>) hdr.ctl.a);
            truncate((bit<32>) hdr.ctl.b);
        } else if (hdr.ctl.mode == 3) {     // then multicast: the replicas start uncut
            truncate((bit<32>) hdr.ctl.a);
            std.mcast_grp = 1;
        } else if (hdr.ctl.mode == 4) {     // then an I2E clone: the clone starts uncut
            truncate((bit<32>) hdr.ctl.a);
            clone(CloneType.I2E, 32w5);
        } else if (hdr.ctl.mode == 6 && meta.pass == 0) {   // then resubmit: uncut
            truncate((bit<32>) hdr.ctl.a);
            meta.pass = 1;
            resubmit_preserving_field_list(1);
        }
        hdr.ctl.pass = meta.pass;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (hdr.ctl.mode == 1) {
            truncate((bit<32>) hdr.ctl.b);
        } else if (hdr.ctl.mode == 5 && std.instance_type == 0) {  // then an E2E clone
            truncate((bit<32>) hdr.ctl.a);
            clone(CloneType.E2E, 32w5);
        } else if (hdr.ctl.mode == 7 && meta.pass == 0) {   // then recirculate: uncut
            truncate((bit<32>) hdr.ctl.a);
            meta.pass = 1;
            recirculate_preserving_field_list(1);
        }
    }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
