"""Bytes on the wire per gradient coordinate, uplink and downlink, headers included.

Frame = Ethernet 14 + IPv4 20 + UDP 8 + HINA header 16 (v2) + payload (no preamble, FCS or gap), for
the program's payload sizes. Compared with fp32's 4 bytes per coordinate.

    python bench/bench_wire.py [--words 32 64 128 256] [--dim 1000000] [--density 0.01 0.05 0.1]

Words per packet: 64, 128, 256 are the v1model program's HINA_WORDS, 32 the TNA program's Tofino 1
build (TNA_LANES=16); the sketch and block-sparse rows are at the default HINA_WORDS.

THC goals: at most 0.75 B/coordinate up and 2.25 down.
"""
from __future__ import annotations

import argparse
import math
import sys

from hina import protocol as P

HEADERS = P.ETHERNET_BYTES + P.IPV4_BYTES + P.UDP_BYTES + P.HEADER_BYTES
FP32 = 4.0
THC_GOAL_UP, THC_GOAL_DOWN = 0.75, 2.25


def frame_bytes(payload: int) -> int:
    return HEADERS + payload


def thc(words: int) -> tuple[float, float]:
    """Per coordinate: 2*words coordinates per packet, words bytes up, 4*words down."""
    coords = 2 * words
    return frame_bytes(words) / coords, frame_bytes(4 * words) / coords


def plain_sum(words: int) -> tuple[float, float]:
    per = frame_bytes(4 * words) / words
    return per, per


def dense_sketch(words: int, dim: int, density: float, rows: int = P.SKETCH_ROWS,
                 slack: float = 1.25) -> tuple[float, float]:
    """Counters (rows x columns, columns = next power of two >= slack * nnz) with SUM, plus the
    dim-bit nonzero bitmap with OR; results have the same size as contributions."""
    nnz = max(1, int(dim * density))
    columns = 1 << math.ceil(math.log2(max(words, slack * nnz)))
    counter_packets = math.ceil(rows * columns / words)
    bitmap_packets = math.ceil(math.ceil(dim / 32) / words)
    total = (counter_packets + bitmap_packets) * frame_bytes(4 * words)
    return total / dim, total / dim


def in_switch_sketch(words: int, dim: int, density: float, rows: int = P.SKETCH_ROWS,
                     slack: float = 1.25) -> tuple[float, float]:
    """Up: PAIRS packets for the nonzeros; down: HARVEST_DATA of every block (plus the small
    requests, counted uplink)."""
    nnz = max(1, int(dim * density))
    columns = 1 << math.ceil(math.log2(max(words, slack * nnz)))
    up = math.ceil(nnz / P.PAIRS_PER_PACKET) * frame_bytes(P.PAIRS_PER_PACKET * P.PAIR_BYTES)
    blocks = rows * columns // words
    up += blocks * frame_bytes(P.HARVEST_HEADER_BYTES)
    down = blocks * frame_bytes(P.HARVEST_HEADER_BYTES + 4 * words)
    return up / dim, down / dim


def block_sparse(words: int, density: float, n_workers: int = 4) -> tuple[float, float]:
    """Block-sparse SUM (protocol v4): each block of ``words`` lanes nonzero at a worker with
    probability ``density`` (independently); a round per block nonzero at some worker, in which
    every worker sends BLOCK_SUM (its nonzero block) or BLOCK_SKIP (the block header only);
    every worker gets the RESULT (block header + lanes). Per coordinate, in expectation (the
    rounds of the streams' first blocks and the padding rounds are left out: a few per call)."""
    union = 1.0 - (1.0 - density) ** n_workers
    skip = frame_bytes(P.BLOCK_HEADER_BYTES)
    lanes = frame_bytes(P.BLOCK_HEADER_BYTES + 4 * words)
    up = (density * lanes + (union - density) * skip) / words
    down = union * lanes / words
    return up, down


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, nargs="+", default=list(P.WORKER_WORDS),
                    choices=P.WORKER_WORDS, help="words per packet (default: every one a "
                    "worker speaks, hina.protocol.WORKER_WORDS)")
    ap.add_argument("--dim", type=int, default=1_000_000)
    ap.add_argument("--density", type=float, nargs="+", default=[0.01, 0.05, 0.10])
    ap.add_argument("--block-density", type=float, nargs="+", default=[0.01, 0.1, 0.5, 1.0])
    args = ap.parse_args(argv)
    print(f"bytes per gradient coordinate (headers {HEADERS} B per frame; fp32 = {FP32:.2f})")
    print(f"{'codec':<34}{'words':>11}{'up':>8}{'down':>8}{'vs fp32 up':>12}")
    ok = True
    for w in args.words:
        up, down = thc(w)
        met = up <= THC_GOAL_UP and down <= THC_GOAL_DOWN
        if w == P.WORDS:
            ok &= met
        print(f"{'THC (b=4, 16-bit sums)':<34}{w:>11}{up:>8.3f}{down:>8.3f}{FP32 / up:>11.2f}x"
              f"  goal {'met' if met else 'missed'}")
    for w in args.words:
        up, down = plain_sum(w)
        print(f"{'SUM (int32)':<34}{w:>11}{up:>8.3f}{down:>8.3f}{FP32 / up:>11.2f}x")
    for d in args.density:
        up, down = dense_sketch(P.WORDS, args.dim, d)
        print(f"{f'dense sketch, density {d:g}':<34}{P.WORDS:>11}{up:>8.3f}{down:>8.3f}"
              f"{FP32 / up:>11.2f}x")
    for d in args.density:
        up, down = in_switch_sketch(P.WORDS, args.dim, d)
        print(f"{f'in-switch sketch, density {d:g}':<34}{P.WORDS:>11}{up:>8.3f}{down:>8.3f}"
              f"{FP32 / up:>11.2f}x")
    for d in args.block_density:
        up, down = block_sparse(P.WORDS, d)
        print(f"{f'block-sparse, {d:g} blocks nonzero':<34}{P.WORDS:>11}{up:>8.3f}{down:>8.3f}"
              f"{FP32 / up:>11.2f}x")
    print("(block-sparse: 4 workers, each block nonzero per worker independently; a block zero "
          "at every worker costs nothing, one zero at a worker costs it a 66 B BLOCK_SKIP)")
    print(f"(sketches: d = {args.dim}, {P.SKETCH_ROWS} rows, columns = next power of two >= "
          "1.25 * nonzeros; dense adds a d-bit nonzero bitmap)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
