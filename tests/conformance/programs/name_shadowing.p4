// Names the standard library uses for parameters, declared by the program as types (p4c reads
// a type name as one only from its declaration on): a parser named `p` (v1model's V1Switch has
// a parameter `p`), a header type `hdr` (core.p4's extract<T>(out T hdr)), and a parameter
// `hdr` of that header's name that shadows it inside its control (p4c warns, and accepts it).
#include <core.p4>
#include <v1model.p4>

header hdr { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers { hdr hdr; }
struct metadata { }

parser p(packet_in b, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start { b.extract(h.hdr); transition accept; }
}

control vrfy(inout headers h, inout metadata m) { apply { } }

control ingress(inout headers hdr, inout metadata m, inout standard_metadata_t sm) {
    action forward(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table t {
        key = { hdr.hdr.dst: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply {
        t.apply();
        if (hdr.hdr.isValid()) { hdr.hdr.ether_type = hdr.hdr.ether_type + 1; }
    }
}

control egress(inout headers h, inout metadata m, inout standard_metadata_t sm) { apply { } }
control compute(inout headers h, inout metadata m) { apply { } }
control deparser(packet_out b, in headers h) { apply { b.emit(h.hdr); } }

V1Switch(p(), vrfy(), ingress(), egress(), compute(), deparser()) main;
