"""The kill -9 rows of the fault suite (controller.faultsuite_kills) in quick mode.

Each row runs the switch, ``hina-ctl serve`` and the workers as separate processes and SIGKILLs
one of them, twice per row at seeded moments; the test asserts the row's "what must hold" (no
wrong sum, recovery within the row's bound) and that nothing the row started is left running.
The full run with its table is ``python bench/bench_faults.py --kills-only``.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from hina.controller import faultsuite_kills as K

QUICK = K.KILL_COUNTS["quick"]


def _check(row) -> None:
    assert row.ok, f"{row.name} [{row.target}]: must hold: {row.must_hold}; held: {row.held}; " \
                   f"{row.details}"
    assert row.count == len(row.details["kills"])


def _children() -> set[int]:
    """Processes whose parent is this one (the rows start theirs from this thread)."""
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == me:
                out.add(int(entry))
    return out


@pytest.fixture
def no_leftovers():
    before = _children()
    yield
    # SIGKILLed children are reaped by Popen.wait: none may be left, running or zombie
    assert _children() - before == set()


#: Each embedded row runs p4/hina.p4 and the TNA program (p4/tna/hina_tna.p4 on the embedded
#: target's TNA dataplane: a replacement's generation re-keys its worker_generation entries,
#: serve re-pushes that program after a switch kill).
PROGRAMS = pytest.mark.parametrize("program", ["v1model", "tna"])


@PROGRAMS
def test_killed_worker(no_leftovers, program):
    row = K.row_kill_worker(QUICK["worker"], program=program)
    assert row.target == K.target_label("embedded", program)
    _check(row)
    replaced, last = row.details["kills"][:-1], row.details["kills"][-1]
    assert all(r["replaced"] and r["generation"] == 1 + i + 1 for i, r in enumerate(replaced))
    assert not last["replaced"] and last["errors"] == ["TransportTimeout"]


@PROGRAMS
def test_killed_switch_embedded(no_leftovers, program):
    row = K.row_kill_switch(QUICK["switch"], "embedded", program=program)
    assert row.target == K.target_label("embedded", program)
    _check(row)
    assert row.details["repushes"] == QUICK["switch"]


def test_killed_switch_bmv2(no_leftovers):
    from hina.controller.bmv2_dataplane import leftovers
    why = K.bmv2_missing()
    if why is not None:
        pytest.skip(f"BMv2 not installed: {why}")
    before = leftovers(os.getpid())
    row = K.row_kill_switch(QUICK["switch"], "bmv2")
    _check(row)
    assert row.details["repushes"] == QUICK["switch"]
    assert leftovers(os.getpid()) == before          # no veth, switch or work folder left


@PROGRAMS
def test_killed_serve(no_leftovers, program):
    row = K.row_kill_serve(QUICK["serve"], program=program)
    assert row.target == K.target_label("embedded", program)
    _check(row)
    assert all(r["results_while_down"] > 0 for r in row.details["kills"])
