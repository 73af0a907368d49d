"""Offline optimiser for THC quantisation tables, and the shipped default table.

THC (Li et al., NSDI'24) maps each rotated, normalised coordinate ``x`` to
``u = (clamp(x, -T, T) + T) * g / (2T)`` in ``[0, g]`` and rounds it stochastically, without bias,
to one of ``2**b`` integer levels ``t_0 = 0 < t_1 < ... < t_{L-1} = g`` (the table). The rounding is
two-stage -- first to an adjacent integer, then to the adjacent table levels -- but because the
levels are integers, an integer between two adjacent levels never leaves them: the two stages
together pick ``a = t_k`` or ``b = t_{k+1}`` around ``u`` with the same probabilities as one
unbiased rounding, so the expected squared error of a coordinate is exactly::

    var(u) = (u - a) * (b - u)

This module minimises ``E[var(U)]`` when ``x`` follows the post-rotation distribution: after a
randomized Hadamard transform and normalisation a coordinate is close to N(0, 1), clamped at T
(the clamped mass sits on the levels 0 and g and costs no variance). The objective is a sum over
adjacent level pairs, so dynamic programming over the ``g + 1`` integers finds the exact optimum.

Run ``python -m hina.worker.codecs.thc_table --bits 4 --granularity 30 --overflow 0.03125`` to print a
table; :data:`DEFAULT_TABLE` is its output for the defaults.
"""
from __future__ import annotations

import argparse
import math
from functools import lru_cache
from statistics import NormalDist
from typing import List, Sequence, Tuple

from hina.protocol import THC_DEFAULT_TABLE

__all__ = [
    "DEFAULT_BITS",
    "DEFAULT_GRANULARITY",
    "DEFAULT_OVERFLOW_PROB",
    "DEFAULT_TABLE",
    "DEFAULT_T",
    "PUBLISHED_TABLE",
    "check_table",
    "clamp_error",
    "expected_variance",
    "optimise_table",
    "threshold_from_overflow",
]

DEFAULT_BITS = 4
DEFAULT_GRANULARITY = 30
#: probability that a N(0, 1) coordinate is clamped (two-sided): 1/32 as in THC
DEFAULT_OVERFLOW_PROB = 1.0 / 32
#: table from the THC paper for b=4, g=30 (our reference point)
PUBLISHED_TABLE: Tuple[int, ...] = (0, 3, 5, 7, 9, 11, 13, 14, 16, 17, 19, 21, 23, 25, 27, 30)

_STD = NormalDist()


def threshold_from_overflow(overflow_prob: float) -> float:
    """Clamp threshold T with ``P(|X| > T) = overflow_prob`` for X ~ N(0, 1).

    Example::
        >>> round(threshold_from_overflow(1 / 32), 4)
        2.1539
    """
    if not 0.0 < overflow_prob < 1.0:
        raise ValueError(f"overflow_prob={overflow_prob!r}: must be in (0, 1)")
    return _STD.inv_cdf(1.0 - overflow_prob / 2.0)


DEFAULT_T = threshold_from_overflow(DEFAULT_OVERFLOW_PROB)


def check_table(table: Sequence[int], bits: int, granularity: int) -> Tuple[int, ...]:
    """Validate a table: ``2**bits`` strictly increasing integers from 0 to ``granularity``.

    Raises:
        ValueError: naming the rule that ``table`` breaks.
    """
    t = tuple(int(v) for v in table)
    if any(int(v) != v for v in table):
        raise ValueError(f"table={list(table)}: levels must be integers")
    if len(t) != 1 << bits:
        raise ValueError(f"table has {len(t)} levels: must have 2**bits = {1 << bits} for bits={bits}")
    if t[0] != 0 or t[-1] != granularity:
        raise ValueError(f"table={list(t)}: must start at 0 and end at granularity={granularity}")
    if any(b <= a for a, b in zip(t, t[1:])):
        raise ValueError(f"table={list(t)}: levels must be strictly increasing")
    return t


def _moments(alpha: float, beta: float) -> Tuple[float, float, float]:
    """Integrals of 1, x, x**2 against the N(0, 1) density over [alpha, beta]."""
    pa, pb = _STD.pdf(alpha), _STD.pdf(beta)
    m0 = _STD.cdf(beta) - _STD.cdf(alpha)
    m1 = pa - pb
    m2 = m0 + alpha * pa - beta * pb
    return m0, m1, m2


def _interval_cost(a: int, b: int, granularity: int, threshold: float) -> float:
    """``E[(U - a)(b - U); a <= U <= b]`` for U = (X + T) g / (2T), X ~ N(0, 1) (exact)."""
    step = 2.0 * threshold / granularity  # x = u * step - T
    alpha, beta = a * step - threshold, b * step - threshold
    m0, m1, m2 = _moments(alpha, beta)
    # (u - a)(b - u) = (x - xa)(xb - x) / step**2 with xa = alpha, xb = beta
    return (-(m2) + (alpha + beta) * m1 - alpha * beta * m0) / step ** 2


def expected_variance(table: Sequence[int], granularity: int = DEFAULT_GRANULARITY,
                      threshold: float = DEFAULT_T) -> float:
    """Expected quantisation variance of one coordinate, in table units (exact).

    Args:
        table: increasing integer levels from 0 to ``granularity``.
        granularity: g.
        threshold: clamp threshold T.

    Returns:
        ``E[(U - a(U)) (b(U) - U)]``; multiply by ``(2T/g)**2`` for normalised units.

    Example::
        >>> expected_variance(PUBLISHED_TABLE) > expected_variance(range(31))
        True
    """
    t = [int(v) for v in table]
    return sum(_interval_cost(a, b, granularity, threshold) for a, b in zip(t, t[1:]))


def clamp_error(threshold: float) -> float:
    """``E[(|X| - T)_+**2]`` for X ~ N(0, 1): the squared error clamping adds per coordinate."""
    tail = 1.0 - _STD.cdf(threshold)
    return 2.0 * ((1.0 + threshold ** 2) * tail - threshold * _STD.pdf(threshold))


def optimise_table(bits: int = DEFAULT_BITS, granularity: int = DEFAULT_GRANULARITY,
                   threshold: float = DEFAULT_T) -> Tuple[int, ...]:
    """The table of ``2**bits`` integer levels in [0, g] minimising :func:`expected_variance`.

    Exact dynamic programming over the integers 0..g: ``best[k][j]`` is the least cost of
    ``k + 1`` levels from 0 to j; O(2**bits * g**2) interval costs.

    Args:
        bits: index width b (2**b levels), 1 <= b <= 8.
        granularity: g >= 2**b - 1.
        threshold: clamp threshold T > 0.

    Returns:
        The optimal table (ties broken towards the lexicographically smallest).

    Example::
        >>> optimise_table(1, 5, 2.0)
        (0, 5)
    """
    if not isinstance(bits, int) or not 1 <= bits <= 8:
        raise ValueError(f"bits={bits!r}: must be an int in [1, 8]")
    levels = 1 << bits
    if not isinstance(granularity, int) or granularity < levels - 1:
        raise ValueError(f"granularity={granularity!r}: must be an int >= 2**bits - 1 = {levels - 1}")
    if not threshold > 0:
        raise ValueError(f"threshold={threshold!r}: must be > 0")
    cost = _cost_matrix(granularity, float(threshold))
    inf = math.inf
    best = [[inf] * (granularity + 1) for _ in range(levels)]
    back = [[-1] * (granularity + 1) for _ in range(levels)]
    best[0][0] = 0.0
    for k in range(1, levels):
        for j in range(k, granularity + 1):
            for i in range(k - 1, j):
                c = best[k - 1][i] + cost[i][j]
                if c < best[k][j]:
                    best[k][j], back[k][j] = c, i
    table: List[int] = [granularity]
    for k in range(levels - 1, 0, -1):
        table.append(back[k][table[-1]])
    return tuple(reversed(table))


@lru_cache(maxsize=8)
def _cost_matrix(granularity: int, threshold: float) -> Tuple[Tuple[float, ...], ...]:
    return tuple(tuple(_interval_cost(a, b, granularity, threshold) if b > a else math.inf
                       for b in range(granularity + 1)) for a in range(granularity + 1))


#: Output of ``optimise_table(4, 30, threshold_from_overflow(1/32))``; a test re-derives it.
DEFAULT_TABLE: Tuple[int, ...] = THC_DEFAULT_TABLE   # defined once in hina.protocol


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: print the optimal table and its expected variance next to the published one."""
    parser = argparse.ArgumentParser(description="optimise a THC quantisation table")
    parser.add_argument("--bits", type=int, default=DEFAULT_BITS)
    parser.add_argument("--granularity", type=int, default=DEFAULT_GRANULARITY)
    parser.add_argument("--overflow", type=float, default=DEFAULT_OVERFLOW_PROB,
                        help="two-sided clamp probability of a N(0,1) coordinate")
    args = parser.parse_args(argv)
    threshold = threshold_from_overflow(args.overflow)
    table = optimise_table(args.bits, args.granularity, threshold)
    print(f"T = {threshold:.6f}")
    print(f"table = {table}")
    print(f"expected variance (table units) = {expected_variance(table, args.granularity, threshold):.6f}")
    if (args.bits, args.granularity) == (DEFAULT_BITS, DEFAULT_GRANULARITY):
        print(f"published {PUBLISHED_TABLE}: "
              f"{expected_variance(PUBLISHED_TABLE, args.granularity, threshold):.6f}")


if __name__ == "__main__":
    main()
