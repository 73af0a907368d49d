// action_selector: entries name a group of members; the member is the hash of the selector keys (crc16 over two fields; identity over one) modulo the group's size, members in the order BMv2 gives them handles (creation order; a new member takes the lowest free handle). Groups created, grown, shrunk from the control plane.
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

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action_selector(HashAlgorithm.crc16, 32w8, 32w16) sel16;
    action_selector(HashAlgorithm.identity, 32w8, 32w8) sel_id;
    action set_out(bit<8> v, bit<9> port) { hdr.k.res = v; std.egress_spec = port; }
    table ecmp {
        key = { hdr.k.a: exact; hdr.k.b: selector; hdr.k.c: selector; }
        actions = { set_out; }
        implementation = sel16;
    }
    table by_c {
        key = { hdr.k.a: exact; hdr.k.c: selector; }
        actions = { set_out; }
        implementation = sel_id;
    }
    apply {
        std.egress_spec = 1;
        if (hdr.k.a == 1) {
            ecmp.apply();
        } else {
            by_c.apply();
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
