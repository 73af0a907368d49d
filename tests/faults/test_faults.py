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


@pytest.mark.parametrize("fault", F.LINK_FAULTS)
def test_link_faults(fault):
    _check(F.row_link_faults(fault, QUICK["elements"]))


@pytest.mark.parametrize("fault", [f for f, faults in F.LINK_FAULTS.items() if not faults.corrupt])
def test_link_faults_tna(fault):
    """The same link faults through the TNA program (TnaLayout entries, its counters)."""
    row = F.row_link_faults(fault, QUICK["elements"], program="tna")
    assert row.target == "embedded, tna"
    _check(row)


def test_tna_sums_a_contribution_corrupted_past_the_fcs():
    """What docs/dataplane.md says of the TNA program (no UDP checksum check of a contribution,
    Tofino's parser cannot sum the unparsed payload): a bit flip that escaped the FCS on the
    way up is summed, a wrong sum no drop reason counts (or a saturated word, refused by the
    workers); flips on the way down are still caught by the workers' check of the result's
    checksum. The row is skipped in the suite's table."""
    fault = next(f for f, faults in F.LINK_FAULTS.items() if faults.corrupt)
    skipped = F.row_link_faults(fault, QUICK["elements"], program="tna")
    assert skipped.held.startswith("skipped") and "UDP checksum" in skipped.held
    row = F.row_link_faults(fault, QUICK["elements"], program="tna", force=True)
    # a flipped low bit is a silently wrong sum; a flipped high bit may saturate a word, which
    # the workers refuse (OverflowFlagged); nothing else fails
    overflowed = [f for f in row.details["failed"] if "OverflowFlagged" in f]
    assert not row.ok and (row.details["wrong"] > 0 or overflowed), row.held
    assert len(overflowed) == len(row.details["failed"]), row.details["failed"]
    assert row.details["reasons"]["BAD_CHECKSUM"] == 0
    assert row.details["results_dropped_corrupt"] > 0


def test_p4runtime_fuzz():
    _check(R.row_p4runtime_fuzz(QUICK["rpc"]))


def test_jobservice_fuzz():
    _check(R.row_jobservice_fuzz(QUICK["rpc"]))
