// expect: 8:44|keyset has 2 elements, select has 1
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
struct h_t { eth_t eth; }
parser P(packet_in pkt, out h_t hdr, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) { (1, 2): accept; default: reject; } }
}
