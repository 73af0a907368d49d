// error: 12: setValid: no such field in header_union u_t
// setValid() on a header union: unions have isValid() only (their members have setValid).
#include <core.p4>
#include <v1model.p4>
header a_t { bit<8> v; }
header b_t { bit<16> v; }
header_union u_t { a_t a; b_t b; }
struct headers_t { a_t x; u_t u; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { state start { pkt.extract(hdr.x); transition accept; } }
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { hdr.u.setValid(); } }
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
