"""Acceptance: the engine reproduces real BMv2 output byte for byte on the golden programs,
and its ProgramInfo carries the facts of the P4Info p4c wrote for them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from hina.softswitch.api import Replica
from hina.softswitch.compiler import compile_file

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def load_vectors(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}_vectors.json").read_text())


@pytest.fixture(scope="module")
def programs() -> dict:
    return {name: compile_file(GOLDEN / f"{name}.p4") for name in ("ops", "tables")}


@pytest.mark.parametrize("name", ["ops", "tables"])
def test_vectors_byte_for_byte(programs, name):
    data = load_vectors(name)
    dp = programs[name].instantiate()
    for group in data.get("mcast", []):
        dp.mcast_group_set(group["group"], [Replica(p, rid) for p, rid in group["replicas"]])
    for i, vec in enumerate(data["vectors"]):
        port = vec.get("port", data.get("port"))
        result = dp.process(port, bytes.fromhex(vec["in"]))
        expected = [(o[0], o[1]) if isinstance(o, list) else (port, o) for o in vec["out"]]
        got = [(p, frame.hex()) for p, frame in result.outputs]
        assert got == expected, f"{name} vector {i} (in {vec['in']})"


def test_ops_register_state_carries_over(programs):
    dp = programs["ops"].instantiate()
    frame = bytes.fromhex(load_vectors("ops")["vectors"][0]["in"])
    for _ in range(3):
        dp.process(1, frame)
    assert dp.register_read("OpsIngress.packets_seen", 0) == 3
    assert programs["ops"].instantiate().register_read("OpsIngress.packets_seen", 0) == 0


def match_kind(field: p4info_pb2.MatchField) -> str:
    return p4info_pb2.MatchField.MatchType.Name(field.match_type).lower()


def parse_p4info(name: str) -> p4info_pb2.P4Info:
    return text_format.Parse((GOLDEN / f"{name}.p4info.txt").read_text(), p4info_pb2.P4Info())


@pytest.mark.parametrize("name", ["ops", "tables"])
def test_program_info_matches_p4c(programs, name):
    ref = parse_p4info(name)
    info = programs[name].info
    actions_by_id = {a.preamble.id: a for a in ref.actions}
    # actions: names, params, annotations
    assert [a.preamble.name for a in ref.actions] == [a.name for a in info.actions]
    for ra, a in zip(ref.actions, info.actions):
        assert [(p.name, p.bitwidth) for p in ra.params] == [(p.name, p.bitwidth) for p in a.params]
        assert list(ra.preamble.annotations) == list(a.annotations)
    # tables
    assert [t.preamble.name for t in ref.tables] == [t.name for t in info.tables]
    for rt, t in zip(ref.tables, info.tables):
        assert [(f.name, f.bitwidth, match_kind(f)) for f in rt.match_fields] == \
            [(f.name, f.bitwidth, f.match_kind) for f in t.match_fields]
        assert [actions_by_id[r.id].preamble.name for r in rt.action_refs] == \
            [r.name for r in t.action_refs]
        assert rt.size == t.size
        assert rt.is_const_table == t.is_const
        assert rt.has_initial_entries == t.has_initial_entries
        const_default = actions_by_id[rt.const_default_action_id].preamble.name \
            if rt.const_default_action_id else None
        assert const_default == t.const_default_action
        init = rt.initial_default_action
        assert actions_by_id[init.action_id].preamble.name == t.initial_default_action.action
        assert [int.from_bytes(a.value, "big") for a in init.arguments] == \
            list(t.initial_default_action.args)
    # registers
    assert [(r.preamble.name, r.type_spec.bitstring.bit.bitwidth, r.size) for r in ref.registers] \
        == [(r.name, r.bitwidth, r.size) for r in info.registers]


def test_compiled_source_recompiles(programs):
    """CompiledProgram.source (the device config) compiles again to the same program."""
    from hina.softswitch.compiler import compile_source
    again = compile_source(programs["tables"].source, "tables.p4")
    assert again.info == programs["tables"].info
