"""The table optimiser: exact optimum (brute force), default table reproduced, beats published."""
import itertools
import math

import pytest
import torch

from hina.worker.codecs.thc_table import (DEFAULT_GRANULARITY, DEFAULT_T, DEFAULT_TABLE, PUBLISHED_TABLE,
                                     check_table, clamp_error, expected_variance, optimise_table,
                                     threshold_from_overflow)


def test_threshold_matches_thc():
    assert threshold_from_overflow(1 / 32) == pytest.approx(2.1539, abs=1e-4)


def test_default_table_is_optimiser_output_and_beats_published():
    assert optimise_table(4, DEFAULT_GRANULARITY, DEFAULT_T) == DEFAULT_TABLE
    ours = expected_variance(DEFAULT_TABLE)
    published = expected_variance(PUBLISHED_TABLE)
    assert ours <= published
    print(f"expected variance: ours {ours:.6f}, published {published:.6f}")


def test_dp_is_exact_against_brute_force():
    bits, g, t = 2, 9, 1.7
    best = min((expected_variance((0,) + mid + (g,), g, t), (0,) + mid + (g,))
               for mid in itertools.combinations(range(1, g), (1 << bits) - 2))
    assert optimise_table(bits, g, t) == best[1]


def test_expected_variance_matches_monte_carlo():
    """Exact integral vs a sampled estimate; tolerance = 5 standard errors of the sample mean."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(400_000, generator=gen, dtype=torch.float64)
    g, t = DEFAULT_GRANULARITY, DEFAULT_T
    u = (x.clamp(-t, t) + t) * g / (2 * t)
    levels = torch.tensor(DEFAULT_TABLE, dtype=torch.float64)
    k = (torch.searchsorted(levels, u, right=True) - 1).clamp(0, len(levels) - 2)
    v = (u - levels[k]) * (levels[k + 1] - u)
    assert v.mean().item() == pytest.approx(expected_variance(DEFAULT_TABLE), abs=5 * v.std().item() / math.sqrt(v.numel()))
    c = (x.abs() - t).clamp(min=0) ** 2
    assert c.mean().item() == pytest.approx(clamp_error(t), abs=5 * c.std().item() / math.sqrt(c.numel()))


@pytest.mark.parametrize("table,match", [((0, 1, 2), "2\\*\\*bits"), ((1,) + PUBLISHED_TABLE[1:], "start at 0"),
                                         ((0, 3, 3) + PUBLISHED_TABLE[3:], "increasing")])
def test_bad_table_refused(table, match):
    with pytest.raises(ValueError, match=match):
        check_table(table, 4, 30)
