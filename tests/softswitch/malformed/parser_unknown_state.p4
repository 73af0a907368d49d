// expect: 7:41|nowhere: no such parser state
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
struct h_t { eth_t eth; }
parser P(packet_in pkt, out h_t hdr, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); transition nowhere; }
}
