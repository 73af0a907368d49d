"""Property: no frame content (truncated, garbage, oversized) makes the dataplane raise."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hina.softswitch.api import Replica
from hina.softswitch.compiler import compile_file

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
PREFIXES = [b"", bytes(12) + b"\x88\xb5", bytes(12) + b"\x88\xb6", bytes(12) + b"\x88\xb7",
            bytes(12) + b"\x88\xb6\x01", bytes(12) + b"\x88\xb6\x02", bytes(12) + b"\x88\xb6\x03"]


@pytest.fixture(scope="module")
def dataplanes():
    dps = {name: compile_file(GOLDEN / f"{name}.p4").instantiate() for name in ("ops", "tables")}
    dps["tables"].mcast_group_set(1, [Replica(1, 10), Replica(2, 20)])
    return dps


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(PREFIXES), body=st.binary(max_size=64),
       port=st.integers(min_value=0, max_value=511), name=st.sampled_from(["ops", "tables"]))
def test_random_frames_never_raise(dataplanes, prefix, body, port, name):
    result = dataplanes[name].process(port, prefix + body, trace=bool(len(body) % 2))
    for out_port, frame in result.outputs:
        assert 0 <= out_port < 512 and isinstance(frame, bytes)


@settings(max_examples=200, deadline=None)
@given(fields=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 2**40)), min_size=1, max_size=6),
       algo=st.sampled_from([0, 1, 2, 3, 5, 6, 7]))
def test_packed_and_field_list_hashes_agree(fields, algo):
    """The generated code's packed-int hash (v1model's: identity as BMv2 has it) equals the
    field-list API other code (the worker, action selectors) uses to mirror the switch's
    hashing."""
    from hina.softswitch.engine import externs
    values = tuple(v & ((1 << w) - 1) for w, v in fields)
    widths = tuple(w for w, _ in fields)
    packed = 0
    for v, w in zip(values, widths):
        packed = (packed << w) | v
    assert externs.compute_hash_v1model(algo, packed, sum(widths)) == \
        externs.compute_hash(algo, values, widths)
    if algo != externs.IDENTITY:
        assert externs.compute_hash_packed(algo, packed, sum(widths)) == \
            externs.compute_hash(algo, values, widths)


def test_identity_is_bmv2s():
    """BMv2's identity: the field list's bytes, zero padding at the end included, the first 8
    only (programs/hash_identity_padding checks the same on BMv2); TNA's keeps the number."""
    from hina.softswitch.engine import externs
    assert externs.identity_bmv2(0b101_00111100, 11) == 0b101_00111100 << 5
    assert externs.identity_bmv2((0x1122334455667788 << 8) | 0x99, 72) == 0x1122334455667788
    assert externs.identity_bmv2(0xABCD, 16) == 0xABCD
    assert externs.compute_hash_packed(externs.IDENTITY, 0b101, 3) == 0b101
