// meter with a configuration (STF meter_set_rates, rates 0: no refill, so the colours depend on the bursts only): a packets meter with committed burst 1 and peak burst 2 marks GREEN (0), YELLOW (1), then RED (2); a bytes meter by the frame's length; an unconfigured cell stays GREEN.
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> idx; bit<8> pkt_color; bit<8> byte_color; bit<8> pad; }
struct headers_t { k_t k; }
struct meta_t { bit<32> c1; bit<32> c2; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    meter(4, MeterType.packets) by_packets;
    meter(4, MeterType.bytes) by_bytes;
    apply {
        by_packets.execute_meter((bit<32>) hdr.k.idx, meta.c1);
        by_bytes.execute_meter((bit<32>) hdr.k.idx, meta.c2);
        hdr.k.pkt_color = (bit<8>) meta.c1;
        hdr.k.byte_color = (bit<8>) meta.c2;
        std.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
