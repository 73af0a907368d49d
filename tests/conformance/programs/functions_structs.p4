// Functions (a void one with out parameters called as a statement, one returning a value), struct assignment and equality, enums, serializable enums in headers, exit.
#include <core.p4>
#include <v1model.p4>

void split(in bit<8> v, out bit<8> twice, inout bit<8> acc) { twice = v << 1; acc = acc + v; }
bit<8> inc(in bit<8> v) { return v + 1; }
enum bit<8> Kind { A = 1, B = 2 }
enum Mode { ON, OFF }
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header kind_t { Kind k; bit<8> res; }
struct pair_t { bit<8> x; bit<8> y; }
struct headers_t { ethernet_t eth; kind_t kind; }
struct meta_t { pair_t p; pair_t q; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.kind); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        Mode mode = Mode.ON;
        bit<8> twice;
        bit<8> acc = 10;
        meta.p = { 3, 4 };
        meta.q = meta.p;
        std.egress_spec = 1;
        if (hdr.kind.k == Kind.B) { mode = Mode.OFF; }
        if (mode == Mode.OFF) {
            split((bit<8>) hdr.kind.k, twice, acc);
            hdr.kind.res = inc(twice + acc);          // 4 + 12 + 1
            exit;
        }
        if (meta.q == meta.p) { hdr.kind.res = meta.q.x + meta.q.y; }    // 7
        meta.q.y = 9;
        if (meta.q != meta.p) { hdr.kind.res = hdr.kind.res + 0x10; }    // 0x17
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
