// Named arguments, in another order than declared, in calls of a generic function (type argument inferred or given), of generic extern functions (hash) and of methods of a generic extern (register read/write).
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> a; bit<8> b; bit<8> r1; bit<8> r2; bit<16> h; bit<8> r3; }
struct headers_t { k_t k; }
struct meta_t {  }

T pick<T>(in T first, in T second, in bool take_second) {
    if (take_second) {
        return second;
    }
    return first;
}

void swap_into<T>(out T lo, out T hi, in T x, in T y, in bool swap) {
    lo = x;
    hi = y;
    if (swap) {
        lo = y;
        hi = x;
    }
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    register<bit<8>>(4) acc;
    apply {
        std.egress_spec = 1;
        hdr.k.r1 = pick(take_second = hdr.k.a > hdr.k.b, second = hdr.k.b, first = hdr.k.a);
        bit<8> lo;
        swap_into<bit<8>>(y = hdr.k.b, swap = hdr.k.a > hdr.k.b, hi = hdr.k.r2, x = hdr.k.a, lo = lo);
        hdr.k.b = lo;
        hash(max = 17w65536, data = { hdr.k.a, hdr.k.b }, base = 16w0,
             algo = HashAlgorithm.csum16, result = hdr.k.h);
        bit<8> v;
        acc.read(index = 1, result = v);
        acc.write(value = v + hdr.k.a, index = 1);
        hdr.k.r3 = v;
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
