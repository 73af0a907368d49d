"""Time THC's transform kernels (``rotate``, ``inverse``, and the encode without error feedback:
``norm``, the rotation that only sums squares, and ``fused``, :func:`rotate_quantise`, of
:mod:`worker.codecs.thc_triton`) over their launch choices on a GPU, and the whole codec with the
best ones.

    python bench/bench_thc_kernels.py [--size 64M] [--blocks 1024] [--warps 2,4,8,16] [--groups 1,2,4,8]
    python bench/bench_thc_kernels.py --quantise 64,128,256,512,1024:2,4,8,16   # + the quantiser

For each Hadamard block, precision, warp count and blocks per program (``G``): the kernel's GPU
time (CUDA events, median of ``--repeats``), its memory traffic in GB/s (rotate: fp32 x,
residual and y, 1/8 byte of signs per coordinate; inverse: int32 sums, fp32 out, signs; norm:
fp32 x and signs; fused: fp32 x, signs and half a byte of indices out) and the
share of the device's copy bandwidth. Every configuration's output is compared with the codec's
current configuration (the same values, bit for bit, for the same precision; within 1e-5 of the
largest value across precisions); one that differs, or fails to build, is reported and not
ranked. Last, THC's encode+decode (``bench_codecs``' measure) with the current launch table and
with the best of each kernel, so that ``LAUNCH_CONFIG``/``BLOCKS_PER_PROGRAM`` can be set from
figures, not guesses.

Without a GPU it runs under Triton's interpreter at a small size (a check that the script
works, no figures).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Dict, List, Optional, Tuple

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from hina.worker.codecs import thc_triton as K  # noqa: E402  (after TRITON_INTERPRET)

BYTES = {"rotate": 4 + 4 + 4 + 0.125, "inverse": 4 + 4 + 0.125, "norm": 4 + 0.125, "fused": 4 + 0.125 + 0.5}
#: the fused kernel runs one block per program: G is not swept for it
ONE_GROUP = ("fused",)


def parse_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
    return int(text[:-1] if text[-1:] in "KM" else text) * mult


def gpu_ms(fn, device: torch.device, repeats: int) -> float:
    """Median GPU milliseconds of ``fn`` (CUDA events) after two warm-ups; wall time on CPU."""
    fn()
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def copy_gbps(d: int, device: torch.device, repeats: int) -> float:
    src = torch.randn(d, device=device)
    dst = torch.empty_like(src)
    return 2 * 4 * d / 1e6 / gpu_ms(lambda: dst.copy_(src), device, repeats)


def _luts(device: torch.device) -> Dict[str, torch.Tensor]:
    """THC's default table's rounding LUTs on ``device`` (the quantising kernels' tables)."""
    from hina.worker.codecs.thc import DEFAULT_TABLE
    from hina.worker.codecs.thc_rounding import rounding_luts
    return {k: v.to(device) for k, v in rounding_luts(DEFAULT_TABLE).items()}


def sweep(d: int, block: int, device: torch.device, precisions: List[str], warps: List[int],
          groups: List[int], repeats: int, copy: float) -> Dict[str, Tuple[float, tuple]]:
    """Print the table for one block; {kernel: (best ms, best config)}."""
    gen = torch.Generator().manual_seed(0)
    padded = -(-d // block) * block
    x = torch.randn(d, generator=gen).to(device)
    res = torch.randn(padded, generator=gen).to(device)
    sums = torch.randint(0, 480, (padded,), generator=gen, dtype=torch.int32).to(device)
    signs = K.pack_sign_bits(torch.randint(0, 2, (padded,), generator=gen) * 2 - 1).to(device)
    y = torch.empty(padded, device=device)
    out = torch.empty(d, device=device)
    parts = torch.empty(padded // block, device=device)
    packed = torch.empty(padded // 2, dtype=torch.uint8, device=device)
    luts = _luts(device)
    current = K.launch_config(device, block)

    def run(kernel: str, config: tuple) -> torch.Tensor:
        if kernel == "rotate":
            K.rotate(x, signs, res, y, block, parts, config=config)
            return y
        if kernel == "norm":
            return K.rotate(x, signs, None, None, block, parts, config=config, padded=padded)
        if kernel == "fused":
            K.rotate_quantise(x, signs, packed, block, luts["offset"], luts["slope"], 7, 0.5, 15.0, 30.0,
                              15.0, config=config)
            return packed.to(torch.float32)
        # sums of THC's table values (0..30) from 16 workers, declared as decode declares them
        K.inverse(sums, signs, out, block, 0.125, 7.5, config=config, sums_bound=480)
        return out

    best: Dict[str, Tuple[float, tuple]] = {}
    print(f"\n== block {block} ({'x'.join(map(str, K.tile_sides(block)))} tiles for the products), {d:,} values; "
          f"current launch {current} ==")
    print(f"{'kernel':8} {'precision':9} {'warps':>5} {'G':>3} {'ms':>8} {'GB/s':>8} {'% copy':>7}  note")
    for kernel in ("rotate", "inverse", "norm", "fused"):
        reference = run(kernel, current).clone()
        scale = float(reference.abs().max())
        for prec in precisions:
            for w in warps:
                for g in (groups[:1] if kernel in ONE_GROUP else groups):
                    config = (prec, w, g)
                    try:
                        ms = gpu_ms(lambda: run(kernel, config), device, repeats)
                        got = run(kernel, config)
                    except Exception as exc:  # noqa: BLE001 - a build failure is a row, not a stop
                        print(f"{kernel:8} {prec:9} {w:>5} {g:>3} {'':>8} {'':>8} {'':>7}  "
                              f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}")
                        continue
                    err = float((got - reference).abs().max())
                    if kernel == "fused" and prec != current[0]:  # indices: a level, rarely
                        ok = err <= 17 and float((got != reference).float().mean()) < 1e-3
                    else:
                        ok = err == 0.0 if prec == current[0] else err <= 1e-5 * scale
                    gbps = BYTES[kernel] * d / 1e6 / ms
                    note = ("current " if config == current else "") + (
                        "" if ok else f"DIFFERS by {err:.3g}: not ranked")
                    print(f"{kernel:8} {prec:9} {w:>5} {g:>3} {ms:8.3f} {gbps:8.1f} "
                          f"{100 * gbps / copy:6.1f}%  {note}")
                    if ok and (kernel not in best or ms < best[kernel][0]):
                        best[kernel] = (ms, config)
        ms, config = best[kernel]
        print(f"{kernel}: best {config} at {ms:.3f} ms "
              f"({100 * BYTES[kernel] * d / 1e6 / ms / copy:.1f}% of copy)")
    return best


def sweep_quantise(d: int, device: torch.device, octets: List[int], warps: List[int], repeats: int,
                   copy: float) -> None:
    """Time :func:`quantise` (no error feedback) over its launch, rows of 8 coordinates per program
    (``QUANT_OCTETS``) times warps (``QUANT_WARPS``); every launch must give the current one's bytes
    (the draws are keyed by the row, not the program)."""
    luts = _luts(device)
    y = torch.randn(d, generator=torch.Generator().manual_seed(1)).to(device)
    packed = torch.empty(d // 2, dtype=torch.uint8, device=device)
    current = (K.QUANT_OCTETS, K.QUANT_WARPS)

    def run() -> None:
        K.quantise(y, packed, luts["offset"], luts["slope"], None, 7, 0.5, 15.0, 30.0, 15.0)
    run()
    reference = packed.clone()
    print(f"\n== quantise, {d:,} values (4.5 bytes each); current launch {current} ==")
    try:
        for rows in octets:
            for w in warps:
                K.QUANT_OCTETS, K.QUANT_WARPS = rows, w
                ms = gpu_ms(run, device, repeats)
                gbps = 4.5 * d / 1e6 / ms
                note = ("current " if (rows, w) == current else "") + (
                    "" if torch.equal(packed, reference) else "DIFFERS")
                print(f"quantise rows {rows:>5} warps {w:>3} {ms:8.3f} ms {gbps:8.1f} GB/s "
                      f"{100 * gbps / copy:6.1f}%  {note}", flush=True)
    finally:
        K.QUANT_OCTETS, K.QUANT_WARPS = current


def codec_gbps(d: int, device: torch.device, repeats: int) -> Tuple[float, dict]:
    """THC (one worker, no error feedback) encode+decode in GB/s of fp32 input, as bench_codecs."""
    from hina.worker.codecs.base import reference_aggregate
    from hina.worker.codecs.thc import ThcCodec
    codec = ThcCodec(1, error_feedback=False, compiled=False)
    x = torch.randn(d, device=device)
    agreed = codec.agreement(x)
    lanes = codec.encode(x, agreed)
    agg = reference_aggregate([lanes])

    def both():
        codec.decode(agg, agreed, meta=lanes.meta)
        codec.encode(x, codec.agreement(x))
    ms = gpu_ms(both, device, repeats)
    if device.type == "cuda":  # where the time goes: each phase alone, wall clock against GPU
        phases = {"agreement": lambda: codec.agreement(x), "encode": lambda: codec.encode(x, agreed),
                  "decode": lambda: codec.decode(agg, agreed, meta=lanes.meta)}
        for name, fn in phases.items():
            wall, gpu = [], []
            for _ in range(repeats):
                if name == "encode":  # encode quantises what an agreement left pending
                    codec.agreement(x)
                torch.cuda.synchronize(device)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize(device)
                wall.append((time.perf_counter() - t0) * 1e3)
                gpu.append(start.elapsed_time(end))
            print(f"  {name:<10} wall {statistics.median(wall):7.3f} ms, between its events on the GPU "
                  f"{statistics.median(gpu):7.3f} ms")
    return 4 * d / 1e6 / ms, dict(codec.last_kernels)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="64M")
    ap.add_argument("--blocks", default="1024")
    ap.add_argument("--precisions", default="", help="default: the device's and ieee")
    ap.add_argument("--warps", default="2,4,8,16")
    ap.add_argument("--groups", default="1,2,4,8")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--quantise", default="", metavar="ROWS:WARPS",
                    help="also sweep the quantiser's launch, e.g. 64,128,256,512,1024:2,4,8,16")
    args = ap.parse_args(argv)
    if not K.AVAILABLE:
        print("Triton is not installed", file=sys.stderr)
        return 1
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    d = parse_size(args.size)
    if device.type == "cpu":
        d, args.repeats = min(d, 4096), 1
        print("no GPU: Triton's interpreter at a small size (checks the script; no figures)")
    else:
        print(f"torch {torch.__version__}, triton {K.triton.__version__}, "
              f"{torch.cuda.get_device_name(device)}")
    precisions = [p for p in args.precisions.split(",") if p] or sorted(
        {K.launch_config(device, int(args.blocks.split(",")[0]))[0], "ieee"})
    copy = copy_gbps(d, device, args.repeats)
    print(f"copy bandwidth {copy:.1f} GB/s (read + write, {d:,} fp32)")
    bests = {}
    for block in (int(b) for b in args.blocks.split(",")):
        bests[block] = sweep(d, block, device, precisions, [int(w) for w in args.warps.split(",")],
                             [int(g) for g in args.groups.split(",")], args.repeats, copy)
    if args.quantise:
        try:
            rows, qwarps = ([int(v) for v in part.split(",")] for part in args.quantise.split(":"))
        except ValueError:
            ap.error("--quantise takes ROWS:WARPS, comma lists of integers, e.g. 128,256:4,8")
        sweep_quantise(d, device, rows, qwarps, args.repeats, copy)
    # the codec end to end: the launch table as it is, then the best of each kernel
    gbps, kernels = codec_gbps(d, device, args.repeats)
    print(f"\nTHC encode+decode, current launch table: {gbps:.1f} GB/s of fp32 input ({kernels})")
    for block, best in bests.items():
        prec = {c[0] for _, c in best.values()}
        if len(prec) != 1:
            print(f"block {block}: the best kernels differ in precision {prec}; not combined")
            continue
        # both kernels share one (precision, warps) entry: take the rotate's warps, each its G
        (_, (p, w, g)) = best["rotate"]
        K.LAUNCH_CONFIG.setdefault(p, {})[block] = w
        K.BLOCKS_PER_PROGRAM.setdefault(p, {})[block] = g
        fused = best.get("fused")
        if fused and fused[1][0] == p:
            K.FUSED_WARPS.setdefault(p, {})[block] = fused[1][1]
        print(f"block {block}: LAUNCH_CONFIG[{p!r}][{block}] = {w}, "
              f"BLOCKS_PER_PROGRAM[{p!r}][{block}] = {g} (inverse's best: {best['inverse'][1]}, "
              f"fused: FUSED_WARPS[{p!r}] = {K.FUSED_WARPS.get(p)})")
    best_precisions = {c[0] for best in bests.values() for _, c in best.values()}
    if len(best_precisions) == 1:  # the codec picks its precision by GPU: name the best one
        os.environ[K.PRECISION_ENV] = best_precisions.pop()
    gbps, kernels = codec_gbps(d, device, args.repeats)
    print(f"THC encode+decode, best rotate launch ({K.PRECISION_ENV}="
          f"{os.environ.get(K.PRECISION_ENV, '')!r}): {gbps:.1f} GB/s of fp32 input ({kernels})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
