"""Benchmark the worker codecs: encode/decode throughput and NMSE next to baselines.

Throughput is GB/s of fp32 input (4 bytes per coordinate) for one worker's ``agreement + encode``
and for ``decode`` of the switch's aggregated lanes, median of ``--repeats`` runs after one warm-up.
On CPU the run is pinned to ``--threads`` threads (1 by default: the one-core figure). On CUDA the
THC rows are the fused Triton kernels (the default there) and the eager path beside them.

Against memory bandwidth: THC's encode+decode must at least read the fp32 gradient, write its
4-bit indices, read the int32 sums and write the fp32 result, 12.5 bytes per coordinate. That
traffic over the measured encode+decode time, as a share of the device's copy bandwidth (a
``copy_`` of the largest size, read + write, measured in the same run), is the figure the
issue's GPU goal (>= 50%) is about.

NMSE is ``||decode - x||^2 / ||x||^2`` for one worker (n = 1, first step, no error feedback) on
three inputs: Gaussian, heavy-tailed (Student t, 3 d.o.f.) and sparse (1% nonzeros, Gaussian).
Baselines at the bits they spend per coordinate:

* fp16 cast (16 bits);
* uniform 4-bit stochastic quantisation: the 15 symmetric levels m * {-7..7} / 7 (zero included,
  one of the 16 codes unused), m = max|x| per block of 1024, unbiased stochastic rounding
  (4 bits + 32 bits per block);
* top-k at THC's bytes: k = d / 16 (int32 index + fp32 value = 64 bits each, so 4 bits/coord);
* PowerSGD rank r in 1..4: our own faithful single step of torch's ``powerSGD_hook`` math on the
  vector reshaped to a near-square m x n matrix M: Q ~ N(0, 1) (n x r), P = M Q, P orthonormalised
  (QR), Q = M^T P, M ~ P Q^T; one power iteration, no warm start, no error feedback
  (32 r (m + n) / d bits per coordinate).

Usage::

    python bench/bench_codecs.py                      # 1M, 16M, 64M on one CPU thread
    python bench/bench_codecs.py --sizes 1M --quick   # fast smoke run
    python bench/bench_codecs.py --device cuda
    python bench/bench_codecs.py --sizes 16M --profile   # THC per-op breakdown
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import time
from typing import Callable, Dict, List, Optional, Tuple

import torch

from hina.worker.codecs.base import Codec, reference_aggregate, reference_agree
from hina.worker.codecs.fixedpoint import FixedPointCodec
from hina.worker.codecs.hadamard import cuda_kernel_available
from hina.worker.codecs import LosslessSketchCodec, SketchCodec
from hina.worker.codecs.thc import ThcCodec
from hina.worker.codecs.thc_triton import PRECISION_ENV
from hina.worker.codecs.thc_table import PUBLISHED_TABLE

FP32_BYTES = 4
#: THC encode+decode's unavoidable traffic per coordinate: fp32 in, 4 bits out, int32 sums in, fp32 out
THC_MIN_BYTES = 4 + 0.5 + 4 + 4
MEGA = 1 << 20
UNIFORM_BITS = 4
UNIFORM_BLOCK = 1024
TOPK_ENTRY_BITS = 64
SPARSE_DENSITY = 0.01
STUDENT_DOF = 3.0
SKETCH_ROWS = 5
#: top-k of the sketch codec: k = columns / 8 keeps it in the count sketch's heavy-hitter regime
SKETCH_K_DIVISOR = 8


def parse_size(text: str) -> int:
    """'1M' -> 2**20, '16M', '512K', or a plain int."""
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": MEGA, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if text[-1:] in "KMG" else text) * mult


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median seconds of ``fn`` after one warm-up."""
    fn()
    sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def sketch_columns(d: int, bits_per_coord: float, rows: int) -> int:
    """Largest power-of-two width with rows * c * 32 <= bits_per_coord * d."""
    return max(1, 1 << int(math.log2(max(1.0, bits_per_coord * d / (32 * rows)))))


def make_sketch(d: int) -> Tuple[str, SketchCodec]:
    """FetchSGD codec at <= 4 bits/coord, k = c / SKETCH_K_DIVISOR (heavy-hitter regime)."""
    c = sketch_columns(d, UNIFORM_BITS, SKETCH_ROWS)
    k = max(1, c // SKETCH_K_DIVISOR)
    return (f"count sketch {SKETCH_ROWS}x{c}, top-{k}",
            SketchCodec(1, rows=SKETCH_ROWS, columns=c, k=k, momentum=0.0, error_feedback=False))


THC_COMPILED = "thc (ours, b=4 g=30, compiled)"


def make_codecs(d: int, device: torch.device) -> Dict[str, Codec]:
    name, sketch = make_sketch(d)
    codecs: Dict[str, Codec] = {"thc (ours, b=4 g=30)": ThcCodec(1, error_feedback=False, compiled=False)}
    if device.type == "cuda":  # the default above runs the Triton kernels where Triton imports
        # the kernels' other choices: the TF32 products (sm_80+) and the butterfly (any GPU)
        tensor_cores = torch.cuda.get_device_capability(device) >= (8, 0)
        for prec in ("tf32x3", "tf32x2", "butterfly") if tensor_cores else ("butterfly",):
            for plan in ThcCodec.ENCODE_PLANS:
                variant = ThcCodec(1, error_feedback=False, compiled=False)
                variant.encode_plan = plan
                codecs[f"thc ({prec}, {plan})"] = variant
                VARIANT_PRECISION[f"thc ({prec}, {plan})"] = prec
        codecs["thc (ours, eager torch ops)"] = ThcCodec(1, error_feedback=False, triton=False)
        codecs.update({"fixed point int32": FixedPointCodec(1), name: sketch})
        return codecs
    start = time.perf_counter()
    compiled = ThcCodec(1, error_feedback=False, compiled=True)  # builds/loads the native kernel once
    if compiled.compiled:
        global COMPILE_SECONDS
        if COMPILE_SECONDS is None:
            COMPILE_SECONDS = time.perf_counter() - start
        codecs[THC_COMPILED] = compiled
    codecs.update({"fixed point int32": FixedPointCodec(1), name: sketch})
    return codecs


#: THC rows run with another transform precision than the GPU's default (HINA_THC_PRECISION)
VARIANT_PRECISION: Dict[str, str] = {}
#: seconds the first ``ThcCodec(compiled=True)`` took (kernel build, or load from the cache)
COMPILE_SECONDS = None


def throughput(d: int, device: torch.device, repeats: int, only: str = "") -> List[Tuple[str, float, float, str]]:
    """[(codec, encode GB/s, decode GB/s, kernels that ran)] for a d-coordinate gradient."""
    x = torch.randn(d, device=device)
    rows = []
    for name, codec in make_codecs(d, device).items():
        if only not in name:
            continue
        with precision(VARIANT_PRECISION.get(name)):
            rows.append(_throughput_row(name, codec, x, d, device, repeats))
        codec.reset()
    return rows


@contextlib.contextmanager
def precision(prec: Optional[str]):
    """HINA_THC_PRECISION set to ``prec`` (None: left alone) while the block runs."""
    old = os.environ.get(PRECISION_ENV)
    if prec is not None:
        os.environ[PRECISION_ENV] = prec
    try:
        yield
    finally:
        if prec is not None:
            if old is None:
                os.environ.pop(PRECISION_ENV, None)
            else:
                os.environ[PRECISION_ENV] = old


def _throughput_row(name: str, codec: Codec, x: torch.Tensor, d: int, device: torch.device,
                    repeats: int) -> Tuple[str, float, float, str]:
    """(codec, encode GB/s, decode GB/s, kernels that ran) of one codec on ``x``."""
    agreed = codec.agreement(x)
    lanes = codec.encode(x, agreed)
    agg = reference_aggregate([lanes])

    def enc():
        codec.encode(x, codec.agreement(x))

    def dec():
        codec.decode(agg, agreed, meta=lanes.meta)

    gbps = d * FP32_BYTES / 1e9
    enc_gbps, dec_gbps = gbps / timed(enc, device, repeats), gbps / timed(dec, device, repeats)
    kernels = ",".join(sorted(set(getattr(codec, "last_kernels", {}).values()))) or "torch"
    return name, enc_gbps, dec_gbps, kernels


def copy_bandwidth(d: int, device: torch.device, repeats: int) -> float:
    """GB/s of ``dst.copy_(src)`` for d fp32 values, counting the read and the write."""
    src = torch.randn(d, device=device)
    dst = torch.empty_like(src)
    return 2 * d * FP32_BYTES / 1e9 / timed(lambda: dst.copy_(src), device, repeats)


# ------------------------------------------------------------------ baselines (one worker)
def nmse(approx: torch.Tensor, x: torch.Tensor) -> float:
    return ((approx.double() - x.double()).norm() ** 2 / x.double().norm() ** 2).item()


def codec_roundtrip(codec: Codec, x: torch.Tensor) -> Tuple[torch.Tensor, float]:
    agreed = reference_agree([codec.agreement(x)])
    lanes = codec.encode(x, agreed)
    out = codec.decode(reference_aggregate([lanes]), agreed, meta=lanes.meta)
    return out, 8 * lanes.nbytes / x.numel()


def uniform_stochastic(x: torch.Tensor, gen: torch.Generator) -> Tuple[torch.Tensor, float]:
    half = (1 << (UNIFORM_BITS - 1)) - 1  # levels -half..half
    pad = -x.numel() % UNIFORM_BLOCK
    xb = torch.cat([x, x.new_zeros(pad)]).view(-1, UNIFORM_BLOCK)
    m = xb.abs().amax(dim=1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
    u = xb / m * half
    q = (u + torch.rand(u.shape, generator=gen, device=u.device)).floor()
    out = (q / half * m).reshape(-1)[: x.numel()]
    return out, UNIFORM_BITS + 32 / UNIFORM_BLOCK


def topk_equal_bytes(x: torch.Tensor, bits_per_coord: float) -> Tuple[torch.Tensor, float]:
    k = max(1, int(bits_per_coord * x.numel() / TOPK_ENTRY_BITS))
    idx = x.abs().topk(k, sorted=False).indices
    out = torch.zeros_like(x)
    out[idx] = x[idx]
    return out, TOPK_ENTRY_BITS * k / x.numel()


def powersgd(x: torch.Tensor, rank: int, gen: torch.Generator) -> Tuple[torch.Tensor, float]:
    d = x.numel()
    rows = 1 << (int(math.log2(d)) // 2)
    cols = -(-d // rows)
    m = torch.cat([x, x.new_zeros(rows * cols - d)]).view(rows, cols)
    q = torch.randn(cols, rank, generator=gen, device=x.device)
    p = m @ q
    p, _ = torch.linalg.qr(p)
    q = m.T @ p
    out = (p @ q.T).reshape(-1)[:d]
    return out, 32 * rank * (rows + cols) / d


def datasets(d: int, device: torch.device) -> Dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    gauss = torch.randn(d, generator=gen)
    torch.manual_seed(0)  # StudentT samples from the global generator
    heavy = torch.distributions.StudentT(STUDENT_DOF).sample((d,))
    sparse = torch.zeros(d)
    nz = torch.randperm(d, generator=gen)[: max(1, int(SPARSE_DENSITY * d))]
    sparse[nz] = torch.randn(nz.numel(), generator=gen)
    return {"gaussian": gauss.to(device), "student-t3": heavy.to(device), "sparse 1%": sparse.to(device)}


def nmse_table(d: int, device: torch.device) -> Tuple[Dict[str, Tuple[List[float], List[float]]], List[str]]:
    """{codec: (bits per coordinate per dataset, NMSE per dataset)}, dataset names."""
    data = datasets(d, device)
    gen = torch.Generator(device=device).manual_seed(1)
    rows: Dict[str, Tuple[List[float], List[float]]] = {}

    def add(name: str, result: Tuple[torch.Tensor, float], x: torch.Tensor) -> None:
        bits, errs = rows.setdefault(name, ([], []))
        bits.append(result[1])
        errs.append(nmse(result[0], x))

    for x in data.values():
        nnz = max(1, int((x != 0).sum()))
        lossless_cols = 1 << max(1, math.ceil(math.log2(nnz / (0.5 * 3))))
        add("thc (ours table)", codec_roundtrip(ThcCodec(1, error_feedback=False), x), x)
        add("thc (published table)", codec_roundtrip(ThcCodec(1, table=PUBLISHED_TABLE, error_feedback=False), x), x)
        add("fixed point int32", codec_roundtrip(FixedPointCodec(1), x), x)
        name, sketch = make_sketch(d)
        add(name, codec_roundtrip(sketch, x), x)
        add("lossless sketch (bitmap + 3 x c, load 0.5)",
            codec_roundtrip(LosslessSketchCodec(1, columns=lossless_cols), x), x)
        add("fp16 cast", (x.half().float(), 16.0), x)
        add("uniform 4-bit stochastic", uniform_stochastic(x, gen), x)
        add("top-k at 4 bits/coord", topk_equal_bytes(x, UNIFORM_BITS), x)
        for rank in range(1, 5):
            add(f"PowerSGD rank {rank} (1 iter)", powersgd(x, rank, gen), x)
    return rows, list(data)


def profile_thc(d: int, device: torch.device, repeats: int) -> None:
    """Print where THC's agreement+encode and decode spend their time, per aten op (self time,
    per call of the codec), after one warm-up."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(d, device=device)
    codec = ThcCodec(1, error_feedback=False)
    agreed = codec.agreement(x)
    lanes = codec.encode(x, agreed)
    agg = reference_aggregate([lanes])
    on_gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    # on a GPU the kernels' device time is what counts; on CPU the ops' own time
    self_time = (lambda e: e.self_device_time_total) if on_gpu else (lambda e: e.self_cpu_time_total)
    for label, fn in (("agreement+encode", lambda: codec.encode(x, codec.agreement(x))),
                      ("decode", lambda: codec.decode(agg, agreed, meta=lanes.meta))):
        fn()
        sync(device)
        with profile(activities=activities) as prof:
            for _ in range(repeats):
                fn()
            sync(device)
        rows = sorted(prof.key_averages(), key=lambda e: -self_time(e))
        total = sum(self_time(e) for e in rows) / repeats / 1e3
        print(f"\n== THC {label}, d = {d}: {total:.3f} ms of {'GPU' if on_gpu else 'CPU'} time per call "
              f"(profiled; kernels: {codec.last_kernels}), by op ==")
        for e in rows:
            ms = self_time(e) / repeats / 1e3
            if ms >= 0.01 * total:
                print(f"  {e.key:<48}{ms:>10.3f} ms{e.count / repeats:>6.0f} call(s)")


def profile_thc_host(d: int, device: torch.device, repeats: int, top: int = 25) -> None:
    """Print where THC's round trip (agreement, encode, decode) spends the host's time: cProfile
    of ``repeats`` round trips after one warm-up, functions by their own time per round trip.
    On a GPU the host's time is what the kernels wait for at each synchronisation."""
    import cProfile
    import pstats

    x = torch.randn(d, device=device)
    codec = ThcCodec(1, error_feedback=False)
    agreed = codec.agreement(x)
    lanes = codec.encode(x, agreed)
    agg = reference_aggregate([lanes])

    def round_trip() -> None:  # one worker: its agreement value is the agreed one
        mine = codec.agreement(x)
        codec.decode(agg, mine, meta=codec.encode(x, mine).meta)

    round_trip()
    sync(device)
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    for _ in range(repeats):
        round_trip()
    sync(device)
    prof.disable()
    wall = (time.perf_counter() - start) / repeats * 1e3
    stats = pstats.Stats(prof)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # (cc, nc, tottime, cumtime, callers)
    print(f"\n== THC round trip on the host, d = {d}: {wall:.3f} ms wall per round trip under cProfile "
          f"(kernels: {codec.last_kernels}); functions by own time ==")
    print(f"{'own ms':>9}{'cum ms':>9}{'calls':>7}  function")
    for (filename, line, name), (_, calls, own, cum, _) in rows[:top]:
        where = f"{os.path.basename(filename)}:{line}" if line else filename
        print(f"{own / repeats * 1e3:>9.4f}{cum / repeats * 1e3:>9.4f}{calls / repeats:>7.1f}  {name} ({where})")


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,16M,64M", help="comma list, e.g. 1M,16M,64M")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (1 = one-core figure)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nmse-size", default="1M", help="coordinates for the NMSE table")
    parser.add_argument("--quick", action="store_true", help="1M only, 1 repeat, 256K NMSE")
    parser.add_argument("--skip-nmse", action="store_true")
    parser.add_argument("--only", default="", help="throughput only for codecs whose name contains this")
    parser.add_argument("--profile", action="store_true",
                        help="per-op breakdown (torch.profiler) of THC encode+decode at the first size")
    parser.add_argument("--host-profile", action="store_true",
                        help="cProfile of THC's round trip on the host at the first size (what the GPU waits for)")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.nmse_size = "1M", 1, "256K"
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device available")
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name(device)}, fast_hadamard_transform: {cuda_kernel_available()})"
             if device.type == "cuda" else f", {torch.get_num_threads()} thread(s)"))
    if args.host_profile:
        profile_thc_host(parse_size(args.sizes.split(",")[0]), device, args.repeats)
        return
    if args.profile:
        profile_thc(parse_size(args.sizes.split(",")[0]), device, args.repeats)
        return
    print("\n== throughput, GB/s of fp32 input (agreement+encode | decode) ==")
    print(f"{'codec':<34}{'size':>6}{'encode':>10}{'decode':>10}{'enc+dec':>10}  kernels")
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    thc_rows = []
    for size in sizes:
        for name, enc, dec, kernels in throughput(size, device, args.repeats, args.only):
            both = 1.0 / (1.0 / enc + 1.0 / dec)
            print(f"{name:<34}{size // MEGA:>5}M{enc:>10.3f}{dec:>10.3f}{both:>10.3f}  {kernels}", flush=True)
            if name.startswith("thc"):
                thc_rows.append((name, size, both))
    if thc_rows:
        copy_gbps = copy_bandwidth(max(sizes), device, args.repeats)
        print(f"\n== THC against memory bandwidth: {THC_MIN_BYTES} B/coordinate at least; "
              f"copy bandwidth {copy_gbps:.1f} GB/s ({max(sizes) // MEGA}M fp32, read + write) ==")
        print(f"{'codec':<34}{'size':>6}{'enc+dec ms':>12}{'traffic GB/s':>14}{'% of copy':>11}")
        for name, size, both in thc_rows:
            seconds = size * FP32_BYTES / 1e9 / both
            traffic = size * THC_MIN_BYTES / 1e9 / seconds
            share = 100 * traffic / copy_gbps
            print(f"{name:<34}{size // MEGA:>5}M{seconds * 1e3:>12.2f}{traffic:>14.2f}{share:>10.1f}%")
    if COMPILE_SECONDS is not None:
        print(f"(compiled THC: native kernel build/load took {COMPILE_SECONDS:.2f} s, excluded from the timings)")
    if args.skip_nmse:
        return
    d = parse_size(args.nmse_size)
    table, names = nmse_table(d, device)
    print(f"\n== NMSE, one worker, d = {d} ==")
    print("each cell: NMSE [bits per coordinate]")
    print(f"{'codec':<44}" + "".join(f"{n:>22}" for n in names))
    for name, (bits, errs) in table.items():
        print(f"{name:<44}" + "".join(f"{e:>12.3e} [{b:>6.3g}]" for b, e in zip(bits, errs)))


if __name__ == "__main__":
    main()
