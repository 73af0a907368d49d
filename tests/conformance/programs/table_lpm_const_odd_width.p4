// An lpm key of bit<13> with const entries: an entry 13w0 &&& 13w6144 is a /2 prefix of the key's 13 bits, so k = 0x0F73 (top bits 01) misses it and k = 0x1000 (top bit 1) takes the /1 entry (P4_16 spec, 14.2.1.2). Found by the random differential test (hina.testing.p4smith, seed 124).
// xfail-bmv2: p4c-bm2-ss writes the entries' prefix lengths as they are in the program (2, 1) and BMv2 counts them from the top of the key's two bytes, where 3 bits of padding are always 0: /2 and /1 over the padding match every key. (On a bit<1> key, such entries stopped simple_switch: the random test found it with seed 142 of an earlier version; not in the corpus, as it would stop the shared switch.)
#include <core.p4>
#include <v1model.p4>

header h_t { bit<3> pad; bit<13> k; bit<8> r; }
struct headers_t { h_t h; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action set(bit<8> v) { hdr.h.r = v; }
    table t {
        key = { hdr.h.k: lpm; }
        actions = { set; NoAction; }
        const entries = {
            13w0 &&& 13w6144: set(1);
            13w4096 &&& 13w4096: set(2);
        }
        default_action = set(0xEE);
    }
    apply {
        std.egress_spec = 1;
        t.apply();
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
