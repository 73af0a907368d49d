"""The fault and fuzz suite (controller.faultsuite) in quick mode: every row's "what must hold".

The full run with its table is ``python bench/bench_faults.py`` (docs/reliability.md, "Fault and
fuzz results"). Seeds are fixed; time bounds are generous (nothing here asserts a time).
"""
from __future__ import annotations

import pytest

from hina.controller import faultsuite as F
from hina.controller import faultsuite_rpc as R
from hina.faults import MUTATIONS

QUICK = F.COUNTS["quick"]


@pytest.fixture(scope="module", params=["v1model", "tna"])
def embedded(request):
    """The embedded switch in process running p4/hina.p4, or the TNA program on its TNA
    dataplane (the same frames, the same rows)."""
    target = F.EmbeddedFrames(request.param)
    yield target
    target.close()


def _check(row: F.Row) -> None:
    assert row.ok, f"{row.name} [{row.target}]: must hold: {row.must_hold}; held: {row.held}; " \
                   f"{row.details}"


def test_random_bytes_change_nothing(embedded):
    row = F.row_random_bytes(embedded, QUICK["random"])
    _check(row)
    assert row.details["changed"] == [] and row.details["outputs"] == 0


def test_malformed_hina_frames_are_counted_and_sums_stay_exact(embedded):
    row = F.row_malformed_hina(embedded, QUICK["hina"])
    _check(row)
    assert "uncounted" not in row.details["outcomes"]
    assert set(row.details["mutations"]) == set(MUTATIONS)


def test_frame_rows_on_bmv2():
    why = F.bmv2_missing()
    if why is not None:
        pytest.skip(f"BMv2 not installed: {why}")
    target = F.Bmv2Frames()
    try:
        for row in F.frame_rows(target, QUICK):
            _check(row)
    finally:
        target.close()


@pytest.mark.parametrize("program", ["v1model", "tna"])
@pytest.mark.parametrize("fault", F.LINK_FAULTS)
def test_link_faults(fault, program):
    """Each link fault through p4/hina.p4 and through the TNA program (TnaLayout entries, its
    counters; a bit flip past the FCS is caught by its parser's UDP checksum unit too)."""
    row = F.row_link_faults(fault, QUICK["elements"], program=program)
    assert row.target == F.target_label("embedded", program)
    _check(row)


def test_p4runtime_fuzz():
    _check(R.row_p4runtime_fuzz(QUICK["rpc"]))


def test_jobservice_fuzz():
    _check(R.row_jobservice_fuzz(QUICK["rpc"]))
