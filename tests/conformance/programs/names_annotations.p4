// Control-plane names as p4c writes them: fully qualified by the control (`MyIngress.fwd`),
// @name annotations honoured (a local name is qualified, a name starting with '.' is global),
// and the tables of an applied control instance named by the instance's path.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_t eth; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control Tagger(inout headers_t hdr) {
    action set_type(bit<16> t) { hdr.eth.ether_type = t; }
    table types {
        key = { hdr.eth.src: exact @name("source"); }
        actions = { set_type; NoAction; }
        default_action = NoAction();
    }
    apply { types.apply(); }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    Tagger() tagger;
    @name("port_counter") counter(4, CounterType.packets) rx;
    @name(".global_register") register<bit<8>>(2) last;
    @name("send") action forward(bit<9> port) { std.egress_spec = port; }
    action drop() { mark_to_drop(std); }
    @name("l2") table fwd {
        key = { hdr.eth.dst: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply {
        rx.count(0);
        last.write(0, 8w7);
        fwd.apply();
        tagger.apply(hdr);
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
