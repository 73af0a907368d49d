// direct_meter with a configuration per entry (STF meter_set_rates NAME HANDLE, rates 0: colours from the bursts only): a hit executes the entry's cell and read() gives its colour; an entry without a configuration is GREEN; a miss reads GREEN (BMv2 meters the default entry, unconfigured).
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> color; bit<8> pad; }
struct headers_t { k_t k; }
struct meta_t { bit<8> color; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    direct_meter<bit<8>>(MeterType.packets) dm;
    action metered(bit<9> port) { dm.read(meta.color); std.egress_spec = port; }
    action unmetered() { dm.read(meta.color); }
    table t {
        key = { hdr.k.a: exact; }
        actions = { metered; unmetered; }
        default_action = unmetered();
        meters = dm;
    }
    apply {
        std.egress_spec = 1;
        meta.color = 0x77;
        t.apply();
        hdr.k.color = meta.color;
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
