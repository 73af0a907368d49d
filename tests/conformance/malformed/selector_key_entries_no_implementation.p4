// error: 12: unknown key match type 'selector'
// Entries in a table with a selector key and no implementation: p4c drops the key and refuses the entries ("unknown key match type 'selector' for key 8w2"); with an implementation they are accepted (programs/action_profile_entries).
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
struct h_t { eth_t eth; }
struct m_t { bit<8> x; bit<16> y; int<8> s; }
parser P(packet_in pkt, out h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    table t { key = { meta.y: exact; meta.x: selector; } actions = { NoAction; } const entries = { (1, 2) : NoAction(); } }
    apply {
        t.apply();
    }
}
control VC(inout h_t hdr, inout m_t meta) { apply { } }
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) { apply { } }
control CC(inout h_t hdr, inout m_t meta) { apply { } }
control D(packet_out pkt, in h_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
