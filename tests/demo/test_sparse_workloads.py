"""The sparse workloads (demo.dlrm, demo.moe) in a tiny configuration: 2 workers, a few dozen
steps, fp32 and one HINA codec through the embedded switch. Checks the comparison table's shape,
that training lowers the loss, and what the density probe measured."""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from hina import codecs as names
from hina.demo.common import RunSpec, parse_runs, run_all, table_rows
from hina.demo.local import LocalDeployment
from hina.demo.dlrm import ClickLogSpec, DlrmWorkload, generate_click_log, popularity, top_share
from hina.demo.moe import MoeWorkload

WORKERS = 2


def _args(**kw) -> argparse.Namespace:
    base = dict(workers=WORKERS, epochs=50, batch=32, lr=0.5, words=128, slots=32, loss=0.0,
                device="cpu", hook="async", max_steps=16, hina_bucket_mb=None)
    return argparse.Namespace(**{**base, **kw})


@pytest.fixture(scope="module")
def switch():
    """One embedded switch for both workloads (each run gets a fresh job on it)."""
    deployment = LocalDeployment(WORKERS)
    yield deployment
    deployment.close()


def _lowered(losses, k: int = 6) -> bool:
    return float(np.mean(losses[-k:])) < float(np.mean(losses[:k]))


def _check_table(results, modes):
    cols, rows = table_rows(results, show_seed=True)
    assert cols[:4] == ["mode", "seed", results[0].metric_name, "ms / step"]
    assert [r[0] for r in rows] == modes and all(len(r) == len(cols) for r in rows)
    ratio = rows[1][cols.index("vs fp32")]
    assert ratio.endswith("x less") and float(ratio[:-len("x less")]) > 0


def test_dlrm_tiny_fp32_and_adaptive_with_per_table_buckets(switch):
    """``adaptive`` with ``--hina-bucket-mb`` small enough that every table has a DDP bucket of
    its own: the sparse tables go lossless and the dense MLP bucket THC, so the job must hold
    THC's table in the switch's LUT (it once did only for ``thc``: every bucket fell back)."""
    wl = DlrmWorkload(ClickLogSpec(rows=(256, 128, 64)), n_train=4096, n_test=1024)
    results = run_all(wl, [RunSpec("fp32"), RunSpec("adaptive")], _args(hina_bucket_mb=0.002),
                      switch)
    _check_table(results, ["fp32", "adaptive"])
    fp32, adaptive = results
    for r in results:
        assert r.steps == 16 and _lowered(r.losses, 4), (r.mode, r.losses)
        assert 0.5 < r.metric <= 1.0, (r.mode, r.metric)
    assert len(adaptive.densities) >= 4, "the tables and the MLP in buckets of their own"
    # through the switch (a starved switch may make a bucket fall back, not most) and every
    # lossless decode exact
    hooked = len(adaptive.densities) * (adaptive.steps - 2)
    assert adaptive.fallback_buckets < hooked // 4 and adaptive.incomplete_peels == 0, \
        (adaptive.fallback_buckets, hooked)
    assert adaptive.bytes_note.startswith("measured")
    # every hooked bucket call made a choice, and the run reports them
    assert set(adaptive.choices) <= set(names.ADAPTIVE_CHOICES)
    assert sum(adaptive.choices.values()) >= hooked, adaptive.choices
    tables = [p for b in adaptive.densities for p in b["params"] if p["name"].startswith("tables.")]
    assert len(tables) == 3
    for p in tables:        # 32 samples hit at most 32 of a table's rows: sparse gradients
        rows = p["numel"] // 16
        assert 0 < p["local"] <= min(1.0, 32 / rows) + 1e-6, p
        assert p["local"] <= p["union"] <= min(1.0, WORKERS * 32 / rows) + 1e-6, p


def test_dlrm_tiny_exact_modes_through_the_tna_program():
    """``--program tna``: the Tofino program (its Tofino 1 size, 32 words, and the block-sparse
    profile) on the embedded target's TNA dataplane; its SUM saturates, which the seats tell
    the workers. The exact modes train as fp32 does, every bucket through the switch."""
    wl = DlrmWorkload(ClickLogSpec(rows=(256, 128, 64)), n_train=4096, n_test=1024)
    with LocalDeployment(WORKERS, words=32, program="tna") as tna:
        seat = tna.create_job()[0]
        assert seat.sum_saturates and seat.words == 32
        tna.delete_job()
        results = run_all(wl, [RunSpec("fp32"), RunSpec("fixed"), RunSpec("block_sparse")],
                          _args(words=32, max_steps=10, hina_bucket_mb=0.002), tna)
    _check_table(results, ["fp32", "fixed", "block_sparse"])
    fp32 = results[0]
    for r in results[1:]:
        assert r.steps == 10 and r.fallback_buckets == 0, (r.mode, r.fallback_buckets)
        assert r.bytes_note.startswith("measured")
        # fixed point of the same gradients: fp32's losses to within its quantisation
        np.testing.assert_allclose(r.losses, fp32.losses, rtol=1e-3, err_msg=r.mode)
        assert abs(r.metric - fp32.metric) < 1e-3, (r.mode, r.metric, fp32.metric)


def test_moe_tiny_fp32_and_thc_through_the_switch(switch):
    wl = MoeWorkload(n_train=2000, n_test=500, experts=16)
    results = run_all(wl, [RunSpec("fp32"), RunSpec("thc")], _args(batch=8, lr=0.01, max_steps=30),
                      switch)
    _check_table(results, ["fp32", "thc"])
    for r in results:
        assert r.steps == 30 and _lowered(r.losses, 8), (r.mode, r.losses)
    thc = results[1]
    assert thc.fallback_buckets < thc.steps - 2 and thc.bytes_note.startswith("measured")
    params = {p["name"]: p for b in thc.densities for p in b["params"]}
    assert set(params) == {"router.weight", "router.bias", "w1", "b1", "w2", "b2"}
    bound = 8 / 16          # 8 tokens, top-1, 16 experts: at most half the experts per worker
    for name in ("w1", "b1", "w2", "b2"):
        assert 0 < params[name]["local"] <= bound + 1e-6, params[name]
    assert params["router.bias"]["local"] == 1.0


def test_click_log_is_reproducible_and_skewed():
    spec = ClickLogSpec(rows=(1000, 300))
    a, b = generate_click_log(40000, seed=7, spec=spec), generate_click_log(40000, seed=7, spec=spec)
    for name in ("dense", "ids", "clicks", "prob"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    other = generate_click_log(40000, seed=8, spec=spec)
    assert not np.array_equal(a.ids, other.ids) and not np.array_equal(a.prob, other.prob)
    for t, rows in enumerate(spec.rows):
        assert a.ids[:, t].min() >= 0 and a.ids[:, t].max() < rows
        # the documented skew: the top 1 % of ids take the share the Zipf law gives them
        want = popularity(rows, spec.zipf)[:rows // 100].sum()
        assert abs(top_share(a.ids[:, t], rows) - want) < 0.02, (t, want)
        assert want > 0.3
    # the popular ids are spread over the id space (a random permutation), not the low ids
    counts = np.bincount(a.ids[:, 0], minlength=1000)
    assert np.argsort(counts)[::-1][:10].max() > 100
    # clicks follow the model's probability
    assert 0.1 < a.clicks.mean() < 0.6
    assert abs(a.clicks.mean() - a.prob.mean()) < 0.01


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="n=0"):
        generate_click_log(0, seed=1)
    with pytest.raises(ValueError, match="unknown mode 'nope'"):
        parse_runs("fp32,nope", ("fp32", "thc"))
    with pytest.raises(ValueError, match="seed after '@'"):
        parse_runs("fp32@x", ("fp32",))
    assert parse_runs("fp32,thc@3", ("fp32", "thc")) == [RunSpec("fp32", 0), RunSpec("thc", 3)]


def test_bucket_caps_by_mode():
    """DLRM's DDP buckets: torch's modes keep DDP's default, HINA's a bucket per table, THC and
    adaptive a bucket per parameter; ``--hina-bucket-mb`` overrides every HINA mode."""
    wl = DlrmWorkload()
    assert wl.bucket_cap_mb_of("fp32") is None and wl.bucket_cap_mb_of("powersgd") is None
    assert wl.bucket_cap_mb_of("block_sparse") == wl.bucket_cap_mb_of("sketched_sgd") == 0.01
    assert wl.bucket_cap_mb_of("thc") == wl.bucket_cap_mb_of("adaptive") == 0.0001
    assert wl.bucket_cap_mb_of("sparse_thc") == 0.0001
    assert wl.bucket_cap_mb_of("thc", 0.5) == wl.bucket_cap_mb_of("fixed", 0.5) == 0.5
    assert wl.bucket_cap_mb_of("fp16", 0.5) is None
    moe = MoeWorkload()
    assert moe.bucket_cap_mb_of("thc") == 0.0001          # a bucket per parameter
    assert moe.bucket_cap_mb_of("sparse_thc") is None and moe.bucket_cap_mb_of("fp32") is None
