"""P4Info generation: p4c's ids, aliases and layout, checked against what real p4c wrote for the
golden programs (tests/golden/*.p4info.txt)."""
from __future__ import annotations

import pytest

from softswitch_util import GOLDEN, PROGRAMS
from hina.softswitch.api import (ActionCall, ActionInfo, ActionRefInfo, ControllerHeaderInfo,
                            DigestInfo, MatchFieldInfo, ParamInfo, ProgramInfo, RegisterInfo,
                            StructFieldInfo, TableInfo)
from hina.softswitch.p4info import (TEXT_HEADER, assign_ids, build_p4info, encode_value,
                               jenkins_one_at_a_time, p4info_to_text, read_p4info_text,
                               shortest_unique_suffixes, write_p4info_text)


@pytest.mark.parametrize("name, prefix, expected", [
    ("NoAction", 0x01, 21257015),
    ("ProbeIngress.exact_t", 0x02, 34336371),
    ("OpsIngress.packets_seen", 0x16, 370069818),
])
def test_ids_match_p4c(name, prefix, expected):
    assert assign_ids(prefix, [name])[name] == expected


def test_colliding_hashes_probe_the_next_id_in_name_order():
    seen: dict[int, str] = {}
    for i in range(100_000):                  # birthday search for two names, one 24-bit hash
        name = f"C.t{i}"
        low = jenkins_one_at_a_time(name) & 0xFFFFFF
        if low in seen:
            first, second = sorted([seen[low], name])
            break
        seen[low] = name
    ids = assign_ids(0x02, [second, first])
    assert ids[first] == (0x02 << 24) | low
    assert ids[second] == (0x02 << 24) | (low + 1)
    assert len(assign_ids(0x01, ["x", "x", "y"])) == 2     # a repeated name is one symbol


def test_aliases_are_shortest_unique_suffixes():
    aliases = shortest_unique_suffixes(["I.a.c", "E.b.c", "I.t", "E.t", "NoAction"])
    assert aliases == {"I.a.c": "a.c", "E.b.c": "b.c", "I.t": "I.t", "E.t": "E.t",
                       "NoAction": "NoAction"}


def test_values_are_padded_to_the_width_as_p4c_writes_them():
    assert encode_value(0xEE, 8) == b"\xee"
    assert encode_value(1, 9) == b"\x00\x01"
    with pytest.raises(ValueError, match="bit<8>"):
        encode_value(256, 8)


def test_handwritten_program_info_gives_the_expected_messages(tmp_path):
    info = ProgramInfo(
        tables=(TableInfo("C.t", (MatchFieldInfo("hdr.x", 8, "exact"),),
                          (ActionRefInfo("C.a"), ActionRefInfo("NoAction", "DEFAULT_ONLY")),
                          initial_default_action=ActionCall("C.a", (1,))),),
        actions=(ActionInfo("NoAction"), ActionInfo("C.a", (ParamInfo("v", 12),))),
        registers=(RegisterInfo("C.r", 16, 4, signed=True),),
        digests=(DigestInfo("learn_t", (StructFieldInfo("src", 48),)),),
        controller_headers=(ControllerHeaderInfo("packet_in", "packet_in_h",
                                                 (StructFieldInfo("port", 9),)),))
    p4info = build_p4info(info)
    (table,) = p4info.tables
    assert [r.scope for r in table.action_refs] == [0, 2]          # TABLE_AND_DEFAULT, DEFAULT_ONLY
    assert list(table.action_refs[1].annotations) == ["@defaultonly"]
    assert table.initial_default_action.arguments[0].value == b"\x00\x01"
    assert p4info.registers[0].type_spec.bitstring.int.bitwidth == 16
    assert p4info.digests[0].type_spec.struct.name == "learn_t"
    assert p4info.type_info.structs["learn_t"].members[0].type_spec.bitstring.bit.bitwidth == 48
    (header,) = p4info.controller_packet_metadata
    assert header.preamble.name == header.preamble.alias == "packet_in"
    assert header.preamble.id >> 24 == 0x04
    assert list(header.preamble.annotations) == ['@controller_header("packet_in")']

    path = tmp_path / "x.p4info.txt"
    write_p4info_text(info, str(path))
    assert path.read_text().startswith(TEXT_HEADER)
    assert read_p4info_text(str(path)) == p4info


@pytest.mark.parametrize("program", ["tables", "ops"])
def test_golden_programs_give_p4c_p4info(program):
    compiler = pytest.importorskip("hina.softswitch.compiler")
    info = compiler.compile_file(str(GOLDEN / f"{program}.p4")).info
    golden_path = GOLDEN / f"{program}.p4info.txt"
    assert build_p4info(info) == read_p4info_text(str(golden_path))
    assert p4info_to_text(build_p4info(info)) == golden_path.read_text()


def test_controller_header_program_compiles_to_p4info():
    compiler = pytest.importorskip("hina.softswitch.compiler")
    p4info = build_p4info(compiler.compile_file(str(PROGRAMS / "p4rt_cpu.p4")).info)
    names = {h.preamble.name: [m.name for m in h.metadata]
             for h in p4info.controller_packet_metadata}
    assert names == {"packet_in": ["ingress_port", "_pad"],
                     "packet_out": ["egress_port", "_pad"]}
    assert [t.preamble.alias for t in p4info.tables] == ["dmac_t", "smac_t", "acl_t",
                                                         "type_range_t"]
    dmac = p4info.tables[0]
    assert list(dmac.direct_resource_ids) == [p4info.direct_counters[0].preamble.id]


def test_id_annotations_fix_ids_and_are_not_copied():
    info = ProgramInfo(actions=(ActionInfo("C.a", annotations=("@id(7)",)),
                                ActionInfo("C.b", annotations=('@name("C.b")', "@x"))))
    a, b = build_p4info(info).actions
    assert a.preamble.id == (0x01 << 24) | 7
    assert list(a.preamble.annotations) == []
    assert list(b.preamble.annotations) == ["@x"]
    with pytest.raises(ValueError, match="wrong 8-bit prefix"):
        build_p4info(ProgramInfo(actions=(ActionInfo("C.a", annotations=("@id(0x02000001)",)),)))


def test_hidden_objects_get_ids_but_are_not_listed():
    info = ProgramInfo(
        tables=(TableInfo("C.t", (), (ActionRefInfo("C.a"), ActionRefInfo("C.h"))),
                TableInfo("E.t", (), (ActionRefInfo("C.h"),), annotations=("@hidden",))),
        actions=(ActionInfo("C.a"), ActionInfo("C.h", annotations=("@hidden",))))
    p4info = build_p4info(info)
    assert [t.preamble.name for t in p4info.tables] == ["C.t"]
    assert [a.preamble.name for a in p4info.actions] == ["C.a"]
    assert p4info.tables[0].action_refs[1].id == assign_ids(0x01, ["C.a", "C.h"])["C.h"]
    assert p4info.tables[0].preamble.alias == "C.t"       # the hidden E.t counts for aliases
    assert list(p4info.tables[0].preamble.annotations) == []


def test_brief_and_description_are_documentation():
    info = ProgramInfo(
        tables=(TableInfo("C.t", (MatchFieldInfo("k", 8, "exact", ('@brief("Key.")', "@k")),),
                          (ActionRefInfo("C.a"),), annotations=('@brief("Table.")',)),),
        actions=(ActionInfo("C.a", (ParamInfo("v", 8, ('@brief("Value.")', "@p")),),
                            ('@brief("Act.")', '@description("Long.")', "@x")),))
    p4info = build_p4info(info)
    table, action = p4info.tables[0], p4info.actions[0]
    assert table.preamble.doc.brief == "Table." and not table.preamble.annotations
    assert table.match_fields[0].doc.brief == "Key."
    assert list(table.match_fields[0].annotations) == ["@k"]
    assert (action.preamble.doc.brief, action.preamble.doc.description) == ("Act.", "Long.")
    assert list(action.preamble.annotations) == ["@x"]
    assert action.params[0].doc.brief == "Value." and list(action.params[0].annotations) == ["@p"]


def test_type_info_only_when_p4c_writes_it():
    assert not build_p4info(ProgramInfo(actions=(ActionInfo("C.a"),))).HasField("type_info")
    with_param = ProgramInfo(actions=(ActionInfo("C.a", (ParamInfo("v", 8),)),))
    assert build_p4info(with_param).HasField("type_info")
    with_register = ProgramInfo(registers=(RegisterInfo("C.r", 8, 4),))
    assert build_p4info(with_register).HasField("type_info")


def test_program_info_is_what_p4c_front_and_mid_end_leave():
    """The facts of programs/p4info_view.p4 (test_p4info_parity.py checks them against p4c)."""
    compiler = pytest.importorskip("hina.softswitch.compiler")
    info = compiler.compile_file(str(PROGRAMS / "p4info_view.p4")).info
    actions = {a.name: [p.name for p in a.params] for a in info.actions}
    assert list(actions) == [
        "NoAction", "tag", "set_mark", "count_up",              # top-level: first use, in front
        "MyIngress.drop", "MyIngress.forward", "MyIngress.direct_only", "MyIngress.both_ways",
        "MyIngress.calls_helper", "MyIngress.hidden_step", "MyIngress.renamed",
        "MyIngress.classify.by_type", "MyIngress.classify.bump",  # where `classify` is declared
        "MyIngress.stamp.stamp", "MyEgress.rewrite"]
    assert actions["MyIngress.direct_only"] == [] and actions["MyIngress.both_ways"] == ["v"]
    assert actions["set_mark"] == [] and actions["count_up"] == []   # the ingress copy: direct
    assert [t.name for t in info.tables] == [
        "MyIngress.classify.class_t", "MyIngress.fwd_t", "MyIngress.acl_t",
        "MyIngress.hidden_t", "MyEgress.rewrite_t"]
    assert [r.name for r in info.registers] == ["MyIngress.class_seen",
                                                "MyIngress.classify.class_hits"]
    assert [c.name for c in info.counters] == ["MyIngress.unused_counter"]
    assert info.direct_counters == ()
    p4info = build_p4info(info)
    assert "MyIngress.hidden_step" not in [a.preamble.name for a in p4info.actions]
    assert "MyIngress.hidden_t" not in [t.preamble.name for t in p4info.tables]
