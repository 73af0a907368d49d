// push_front(2) and pop_front(2) on a header stack of 4: elements shift, new ones are invalid, the ones shifted out are lost.
#include <core.p4>
#include <v1model.p4>

header e_t { bit<8> v; }
header o_t { bit<8> op; }
struct headers_t { o_t o; e_t[4] s; }
struct meta_t {  }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.o); pkt.extract(hdr.s.next); pkt.extract(hdr.s.next); pkt.extract(hdr.s.next); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply {  }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        if (hdr.o.op == 1) {
            hdr.s.push_front(2);
            hdr.s[0].setValid();
            hdr.s[0].v = 0xA0;
        } else {
            hdr.s.pop_front(2);
        }
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
