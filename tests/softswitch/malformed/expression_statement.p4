// expect: 8:34|expression statement must be a method or function call
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
struct h_t { eth_t eth; }
struct m_t { }
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    apply { std.egress_spec = 1; hdr.eth.etype; }
}
