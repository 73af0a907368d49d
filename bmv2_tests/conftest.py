"""Fixtures of the dataplane tests: a ``target`` per kind of switch, and HINA jobs on it.

``target`` is parametrised over ``embedded`` (the in-process softswitch, always), ``bmv2``
(real ``simple_switch_grpc``; skipped with the reason when the binaries are absent) and
``embedded-tna`` (the TNA program, p4/tna/hina_tna.p4, on the embedded target's TNA dataplane).
Test bodies are the same for all: the same frames, the same expected bytes. What the TNA program
does not do is listed once, in :data:`TNA_UNSUPPORTED`; those cases skip with its reason.
"""
from __future__ import annotations

import pytest

from hina.testing.targets import (Bmv2Target, EmbeddedTarget, EmbeddedTnaTarget, bmv2_missing,
                                  close_shared_bmv2)

#: The program size the tests compile by default: small payloads keep the embedded target fast.
#: ``test_default_size.py`` runs the default HINA_WORDS as well.
TEST_WORDS = 64
TEST_DEFINES = {"HINA_WORDS": TEST_WORDS}


_NOTICE_TEST = "test_generation.py::test_notice_is_header_only_and_goes_back_out_of_the_ingress_port"

#: What the TNA program (p4/tna/hina_tna.p4) does differently from p4/hina.p4, and the cases
#: of the dataplane tests that therefore cannot pass on ``embedded-tna`` with the v1model
#: program's expected bytes: ``{reason: [node id prefixes]}``. A node id prefix is
#: ``file::test`` (every parametrisation) or ``file::test[`` plus the start of its parameters
#: other than the target's (``test_checksum.py::test_bad_checksums...[wrong``).
#: docs/dataplane.md ("Tofino (TNA)") says why each difference is there.
TNA_UNSUPPORTED = {
    "SUM and BLOCK_SUM saturate on Tofino, sticky at the bound (one stateful ALU output per "
    "word: no overflow flag, no OVERFLOW count; tna_lanes.p4, test_tna_sum_saturation_sticks)":
        ["test_aggregation.py::test_overflow_is_flagged_never_silent",
         "test_block_sparse.py::test_block_sum_overflow_is_flagged"],
    "a THC packet whose LUT is not installed is summed as zeros, not dropped as BAD_JOB "
    "(a shared miss flag would chain the 32 LUT tables a stage each; tna_lanes.p4)":
        ["test_aggregation.py::test_thc_without_table_is_bad_job"],
    "no other-copy seq check (it needs both copies' seqs in one stateful ALU; "
    "tna_slot_state.p4): a late copy of chunk u after the worker moved to u + n_slots counts":
        ["test_exactly_once.py::test_late_copy_after_the_worker_moved_on_is_stale"],
    "a late packet of a slot copy every worker has left is answered with the stored result, "
    "not dropped as STALE_POOL (no count register: the copy's bitmap must stay complete for a "
    "worker that lost its result; tna_slot_state.p4)":
        ["test_aggregation.py::test_stale_round_is_dropped"],
    "HARVEST and RESET are the control plane's on TNA (register reads and writes), not "
    "switch messages (a pass per counter block; tna_sketch.p4)":
        ["test_sketch.py::test_harvest_outside_the_sketch_is_bad_slot",
         "test_sketch.py::test_job_without_sketch_cannot_touch_counters",
         f"{_NOTICE_TEST}[harvest", f"{_NOTICE_TEST}[reset",
         "test_forgery.py::test_forged_sketch_messages_are_dropped"],
    "a packet carries at most 64 words on TNA (TNA_LANES <= 32, two blocks): "
    "HINA_WORDS = 128 does not exist there":
        ["test_default_size.py::test_thc_eight_workers_default_size"],
}


def _tna_unsupported(nodeid: str):
    """The reason ``nodeid`` (an ``embedded-tna`` case) cannot run on the TNA program, or None."""
    name = nodeid.rsplit("/", 1)[-1].replace("[embedded-tna-", "[").replace("[embedded-tna]", "")
    for reason, prefixes in TNA_UNSUPPORTED.items():
        if any(name.startswith(p) for p in prefixes):
            return reason
    return None


#: To keep the suite's time (about half a second per embedded-tna case), the worker counts of ``test_exact_result_matches_numpy`` that run on
#: ``embedded-tna``: the smallest and the largest, each with every op.
TNA_WORKER_COUNTS = (2, 8)


def pytest_collection_modifyitems(config, items):
    keep, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("target_kind") != "embedded-tna":
            keep.append(item)
            continue
        if (item.originalname == "test_exact_result_matches_numpy"
                and callspec.params.get("n_workers") not in TNA_WORKER_COUNTS):
            dropped.append(item)
            continue
        keep.append(item)
        reason = _tna_unsupported(item.nodeid)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"TNA program: {reason}"))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _make_target(kind: str):
    if kind in ("embedded", "embedded-tna"):
        try:
            import hina.softswitch.compiler  # noqa: F401
        except ImportError as exc:
            pytest.skip(f"the embedded engine is not available: {exc}")
        return EmbeddedTarget() if kind == "embedded" else EmbeddedTnaTarget()
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)
    return Bmv2Target()


@pytest.fixture(params=["embedded", "bmv2", "embedded-tna"])
def target_kind(request):
    return request.param


@pytest.fixture
def target(target_kind):
    """A switch running p4/hina.p4 (``embedded-tna``: p4/tna/hina_tna.p4 at the same packet
    size) compiled with ``TEST_DEFINES``, no jobs installed."""
    t = _make_target(target_kind)
    t.load(defines=TEST_DEFINES)
    yield t
    t.close()


@pytest.fixture(scope="session", autouse=True)
def _stop_shared_bmv2():
    """The session's BMv2 switch (started by the first BMv2 case) goes with the session."""
    yield
    close_shared_bmv2()
