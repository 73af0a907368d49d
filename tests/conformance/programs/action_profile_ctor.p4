// An action profile and an action selector written as constructor calls in the tables' implementation property (as p4c's samples write them); p4c-bm2-ss names each by the property's @name as written (a leading dot dropped, never qualified by the control, in a nested control instance too), and the control plane addresses them by that name.
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<16> b; bit<8> c; bit<8> res; }
struct headers_t { k_t k; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control Inner(inout headers_t hdr, inout standard_metadata_t std) {
    action mark(bit<8> v) { hdr.k.res = v; }
    table inner_t {
        key = { hdr.k.c: exact; }
        actions = { mark; }
        @name("inner_prof") implementation = action_profile(32w16);
    }
    apply { inner_t.apply(); }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    Inner() inner;
    action set_out(bit<8> v, bit<9> port) { hdr.k.res = v; std.egress_spec = port; }
    action mark(bit<8> v) { hdr.k.res = v; }
    table prof_t {
        key = { hdr.k.a: exact; }
        actions = { set_out; mark; }
        @name("prof") implementation = action_profile(32w128);
    }
    table ecmp {
        key = { hdr.k.a: exact; hdr.k.b: selector; hdr.k.c: selector; }
        actions = { set_out; }
        @name(".ecmp_sel") implementation = action_selector(HashAlgorithm.crc16, 32w1024, 32w14);
    }
    apply {
        std.egress_spec = 1;
        if (hdr.k.a == 0) {
            inner.apply(hdr, std);
        } else if (hdr.k.a < 8) {
            prof_t.apply();
        } else {
            ecmp.apply();
        }
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
