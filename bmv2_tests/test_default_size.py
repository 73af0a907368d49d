"""The program at its default sizes (HINA_WORDS = 128: 256 THC coordinates per packet)."""
from __future__ import annotations

import numpy as np
import pytest

from hina import pipeline
from hina import protocol as P
from bmv2_tests.conftest import _make_target
from hina.testing.frames import contribution, install, install_lut, make_job, reference, send


@pytest.fixture
def default_target(target_kind):
    t = _make_target(target_kind)
    t.load()
    yield t
    t.close()


def test_thc_eight_workers_default_size(default_target):
    n, lut_id = 8, 1
    job = make_job(1, n, lut_id=lut_id, words=P.WORDS)
    install(default_target, job)
    install_lut(default_target, lut_id, words=P.WORDS)
    rng = np.random.default_rng(8)
    idx = [rng.integers(0, P.THC_TABLE_SIZE, 2 * P.WORDS) for _ in range(n)]
    replies = []
    for w in range(n):
        replies += send(default_target, job, w, contribution(job, w, P.Op.LUT_SUM, idx[w]))
    assert len(replies) == n
    expected = reference(P.Op.LUT_SUM, idx, pipeline.THC_DEFAULT_TABLE)
    for r in replies:
        assert len(r.payload) == 4 * P.WORDS and r.ip_ok
        np.testing.assert_array_equal(r.words(), expected)
        # 16-bit sums in coordinate order, as the worker decodes them.
        np.testing.assert_array_equal(
            r.words(">u2"), np.asarray(pipeline.THC_DEFAULT_TABLE)[np.stack(idx)].sum(axis=0))
