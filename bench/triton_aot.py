"""Compile THC's Triton kernels for real GPU targets without a GPU, and report what ptxas made.

Triton compiles ahead of time for a named target (``GPUTarget("cuda", arch, 32)``) with the
ptxas it ships, so every kernel in :mod:`worker.codecs.thc_triton` can be built here for sm_75,
sm_80 and sm_90 with the launch configuration the codec uses (``LAUNCH_CONFIG``), and its
resource use read back from the cubin (``cuobjdump -res-usage``): registers per thread, stack
(register spills), shared memory. This is the check that the kernels are valid Triton for those
GPUs beyond what the CPU interpreter accepts; it says nothing of their speed.

Usage::

    python bench/triton_aot.py                 # every kernel, block and arch: a table
    python bench/triton_aot.py --archs 90 --blocks 1024 --check   # exit 1 on a failure or a spill
    python bench/triton_aot.py --check --max-spill 32              # ... or a spill over 32 bytes
    python bench/triton_aot.py --archs 90 --blocks 1024 --sass     # + SASS instruction counts
    python bench/triton_aot.py --precisions codec,butterfly       # + the butterfly transform
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter replaces the compiler: drop it
    os.environ.pop("TRITON_INTERPRET")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, stated (no warning)
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from hina.worker.codecs import thc_triton as K

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
ROTATE_SIG = {"X": "*fp32", "SIGN_WORDS": "*i32", "RES": "*fp32", "Y": "*fp32", "PARTIAL": "*fp32", "numel": "i64",
              "nblocks": "i64", "norm": "fp32"}
INVERSE_SIG = {"SUMS": "*i32", "SIGN_WORDS": "*i32", "OUT": "*fp32", "numel": "i64", "nblocks": "i64",
               "scale": "fp32", "off0": "fp32"}
FUSED_SIG = {"X": "*fp32", "SIGN_WORDS": "*i32", "PACKED": "*u8", "OFFSET": "*fp32", "SLOPE": "*fp32", "seed": "i64",
             "numel": "i64", "n_pairs": "i64", "norm": "fp32", "a": "fp32", "half_g": "fp32", "g": "fp32",
             "top": "fp32"}
QUANT_SIG = {"Y": "*fp32", "PACKED": "*u8", "OFFSET": "*fp32", "SLOPE": "*fp32", "DEQ": "*fp32", "RAND": "*i16",
             "seed": "i64", "n_pairs": "i64", "a": "fp32", "half_g": "fp32", "g": "fp32", "top": "fp32"}


def compile_kernel(fn, signature: Dict[str, str], constants: Dict[str, object], arch: int,
                   warps: int, sass: bool = False) -> Dict[str, int]:
    """Compile ``fn`` for sm_<arch>; {"REG", "STACK", "SHARED", "LOCAL"} from its cubin and, with
    ``sass``, "SASS" (instructions in the kernel's code) and "I2F" (int-to-float conversions
    among them, a quarter-rate instruction), compiled as Triton's JIT specialises a launch on
    buffers whose sizes are multiples of 16 (pointers and lengths divisible by 16: vector loads)."""
    sig = dict(signature, **{k: "constexpr" for k in constants})
    names = list(sig)
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(names)
             if sass and (sig[name].startswith("*") or sig[name] == "i64") and name != "seed"}
    src = ASTSource(fn=fn, signature=sig, constexprs={(names.index(k),): v for k, v in constants.items()},
                    attrs=attrs)
    options = {"num_warps": warps}
    if fn is K._inverse_kernel:  # as thc_triton.inverse launches it: no fused multiply-adds
        options["enable_fp_fusion"] = False
    kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        out = subprocess.run([str(CUOBJDUMP), "-res-usage", str(cubin)], capture_output=True, text=True,
                             check=True).stdout
        use = {k: int(v) for k, v in re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", out)}
        if sass:
            code = subprocess.run([str(CUOBJDUMP), "-sass", str(cubin)], capture_output=True, text=True,
                                  check=True).stdout
            ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", code, re.M)
            use["SASS"] = len(ops)
            use["I2F"] = sum(op.startswith("I2F") for op in ops)
    return use


def jobs(archs: List[int], blocks: List[int], precisions: Tuple[str, ...] = ("codec",)
         ) -> List[Tuple[str, int, object, Dict[str, str], Dict[str, object], int]]:
    """(label, arch, kernel, signature, constants, warps) for every kernel the codec launches,
    in the precision it picks for each arch ("codec") and in each other one named."""
    out = []
    for arch in archs:
        chosen = [K.precision_for((arch // 10, arch % 10)) if p == "codec" else p for p in precisions]
        for prec, block in ((p, b) for p in dict.fromkeys(chosen) for b in blocks):
            if prec.startswith("tf32") and arch < 80:
                continue  # TF32 products need sm_80 (the codec refuses the choice there)
            warps = K.LAUNCH_CONFIG[prec].get(block)
            if warps is None:
                continue  # the codec keeps this block eager on this arch
            group = K.BLOCKS_PER_PROGRAM[prec].get(block, 1)
            r, c = K.kernel_tile(prec, block)
            # float32 gradients with error feedback (y stored) and without (the norm alone);
            # half-precision ones read as they are
            for x_type, has_res in (("fp32", False), ("fp32", True), ("bf16", True), ("fp16", True)):
                out.append((f"rotate   block {block:>4} ({r}x{c}) {prec:<9} {x_type} residual={int(has_res)}", arch,
                            K._rotate_kernel, dict(ROTATE_SIG, X=f"*{x_type}"),
                            {"R": r, "C": c, "G": group, "HAS_RES": has_res, "PREC": prec, "STORE_Y": has_res},
                            warps))
            # the codec's decode passes the bound of THC's sums (small: one product fewer)
            for small in (True, False):
                out.append((f"inverse  block {block:>4} ({r}x{c}) {prec:<9} small sums={int(small)}", arch,
                            K._inverse_kernel, INVERSE_SIG,
                            {"R": r, "C": c, "G": group, "PREC": prec, "SMALL_SUMS": small}, warps))
            # encode without error feedback: rotation and rounding in one kernel
            for x_type in ("fp32", "bf16"):
                out.append((f"fused    block {block:>4} ({r}x{c}) {prec:<9} {x_type}", arch,
                            K._rotate_quantise_kernel, dict(FUSED_SIG, X=f"*{x_type}"),
                            {"R": r, "C": c, "PREC": prec}, K.FUSED_WARPS[prec].get(block, warps)))
        for has_deq in (False, True):
            out.append((f"quantise {8 * K.QUANT_OCTETS} values, error feedback={int(has_deq)}", arch,
                        K._quantise_kernel, QUANT_SIG,
                        {"OCTETS": K.QUANT_OCTETS, "HAS_DEQ": has_deq, "HAS_RAND": False}, K.QUANT_WARPS))
    return out


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="75,80,90", help="comma list of sm versions")
    parser.add_argument("--blocks", default=",".join(str(b) for b in K.LAUNCH_CONFIG["tf32x3"]),
                        help="comma list of Hadamard block sizes")
    parser.add_argument("--precisions", default="codec",
                        help="comma list of the transforms' precisions: 'codec' (what the codec picks for "
                             f"each arch, the default) and/or any of {', '.join(K.LAUNCH_CONFIG)}")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a kernel fails or spills more than --max-spill bytes")
    parser.add_argument("--sass", action="store_true",
                        help="also count each kernel's SASS instructions and int-to-float conversions")
    parser.add_argument("--max-spill", type=int, default=0,
                        help="stack bytes a kernel may spill under --check (default 0)")
    args = parser.parse_args(argv)
    try:
        archs = [int(a) for a in args.archs.split(",")]
        blocks = [int(b) for b in args.blocks.split(",")]
    except ValueError:
        parser.error("--archs and --blocks take comma-separated integers")
    precisions = tuple(args.precisions.split(","))
    unknown = [p for p in precisions if p != "codec" and p not in K.LAUNCH_CONFIG]
    if unknown:
        parser.error(f"--precisions: unknown {', '.join(unknown)} (choose from codec, {', '.join(K.LAUNCH_CONFIG)})")
    if not CUOBJDUMP.exists():
        parser.error(f"{CUOBJDUMP}: Triton's bundled cuobjdump is missing (a Triton build without the NVIDIA backend?)")
    print(f"triton {triton.__version__}; registers per thread, stack bytes (spills), shared bytes")
    bad = 0
    for label, arch, fn, sig, constants, warps in jobs(archs, blocks, precisions):
        try:
            use = compile_kernel(fn, sig, constants, arch, warps, sass=args.sass)
        except Exception as exc:  # noqa: BLE001 - report every failure, then exit non-zero
            bad += 1
            print(f"sm_{arch}  {label:<61} FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            continue
        spills = use.get("STACK", 0) + use.get("LOCAL", 0)
        bad += spills > args.max_spill
        print(f"sm_{arch}  {label:<61} warps {warps:>2}  reg {use.get('REG', 0):>3}  stack {use.get('STACK', 0):>4}"
              f"  shared {use.get('SHARED', 0):>5}"
              + (f"  SASS {use['SASS']:>5}  I2F {use['I2F']:>3}" if args.sass else "")
              + ("  SPILLS" if spills else ""), flush=True)
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
