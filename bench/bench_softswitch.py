"""Packets per second through the softswitch engine, in process (no ports, no gRPC).

Usage::

    .venv/bin/python bench/bench_softswitch.py [PROGRAM.p4 ...] [--packets N] [--frame HEX]

Always measures ``bench/programs/basic.p4`` (tutorials-style IPv4 LPM forwarding with a few
routes, TTL decrement and checksum update); each extra program is fed minimal Ethernet frames
(with no table entries), or the frame ``--frame`` gives, to measure its parser/control overhead. Prints one line per program:
kpps and microseconds per packet of the best round, and the median round's kpps.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from hina.softswitch.api import ActionCall, Lpm, TableEntry
from hina.softswitch.compiler import compile_file

HERE = os.path.dirname(os.path.abspath(__file__))
BASIC = os.path.join(HERE, "programs", "basic.p4")
DEFAULT_PACKETS = 50_000
DEFAULT_ROUNDS = 3
ROUTES = ((0x0A000100, 24, 0x000000000101, 1), (0x0A000200, 24, 0x000000000202, 2),
          (0x0A000000, 8, 0x000000000303, 3), (0xC0A80000, 16, 0x000000000404, 4))


def ipv4_frame(dst: int, payload: bytes = b"\0" * 26) -> bytes:
    """Ethernet + IPv4 (valid checksum) + payload, to ``dst``."""
    total = 20 + len(payload)
    hdr = bytearray(20)
    hdr[0], hdr[2:4], hdr[8], hdr[9] = 0x45, total.to_bytes(2, "big"), 64, 17
    hdr[12:16], hdr[16:20] = (0x0A000001).to_bytes(4, "big"), dst.to_bytes(4, "big")
    s = sum(int.from_bytes(hdr[i:i + 2], "big") for i in range(0, 20, 2))
    s = (s & 0xFFFF) + (s >> 16)
    hdr[10:12] = ((~s) & 0xFFFF).to_bytes(2, "big")
    eth = bytes.fromhex("0000000000aa" "0000000000bb" "0800")
    return eth + bytes(hdr) + payload


def measure(dp, frames: list, n: int, rounds: int = 1) -> list:
    """Seconds to process ``n`` frames (cycling through ``frames``), once per round."""
    process = dp.process
    k = len(frames)
    for i in range(min(n, 1000)):          # warm-up
        process(1, frames[i % k])
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(n):
            process(1, frames[i % k])
        times.append(time.perf_counter() - t0)
    return times


def report(name: str, times: list, n: int) -> None:
    """One line: the best round (least disturbed by other processes) and the median."""
    best = min(times)
    median = sorted(times)[len(times) // 2]
    print(f"{name}: {n / best / 1000:.1f} kpps, {best / n * 1e6:.2f} us/packet "
          f"(best of {len(times)} rounds of {n} packets; median {n / median / 1000:.1f} kpps)")


def bench_basic(n: int, rounds: int) -> None:
    dp = compile_file(BASIC).instantiate()
    for value, plen, mac, port in ROUTES:
        dp.table_insert(TableEntry("MyIngress.ipv4_lpm", (Lpm(value, plen),),
                                   ActionCall("MyIngress.ipv4_forward", (mac, port))))
    frames = [ipv4_frame(0x0A000105), ipv4_frame(0x0A000207), ipv4_frame(0x0A090909),
              ipv4_frame(0xC0A80101)]
    assert all(dp.process(1, f).outputs for f in frames), "basic.p4 did not forward"
    report("basic.p4 (ipv4_lpm, 4 routes)", measure(dp, frames, n, rounds), n)


def bench_program(path: str, n: int, rounds: int, frame: bytes = b"") -> None:
    dp = compile_file(path).instantiate()
    frames = [frame or ipv4_frame(0x0A000105)]
    if frame and not dp.process(1, frame).outputs:
        raise SystemExit(f"{path}: the --frame given does not come out of the program")
    report(os.path.basename(path), measure(dp, frames, n, rounds), n)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="*", help="extra .p4 programs to measure")
    ap.add_argument("--packets", type=int, default=DEFAULT_PACKETS, help="packets per round")
    ap.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="rounds (best is reported)")
    ap.add_argument("--frame", type=bytes.fromhex, default=b"",
                    help="the frame (hex) fed to the extra programs, instead of a minimal IPv4 one")
    args = ap.parse_args(argv)
    bench_basic(args.packets, args.rounds)
    for p in args.programs:
        bench_program(p, args.packets, args.rounds, args.frame)
    return 0


if __name__ == "__main__":
    sys.exit(main())
