"""Fast Walsh-Hadamard transform (blockwise, orthonormal) and the randomized Hadamard transform.

``fwht(x, block)`` applies the orthonormal Hadamard matrix ``H_B / sqrt(B)`` to each contiguous
block of ``B = 2**m`` values. ``H_B`` is the Kronecker power of ``H_2``, so it factors into small
Hadamard matrices ``H_{f1} (x) H_{f2} (x) ...`` (each ``f <= 2**MAX_FACTOR_LOG2``); applying one
small dense factor per axis is a batched matmul, O(B * sum(f)) work per block instead of the
butterfly's O(B log B) but in a few memory passes and on the matmul units, which is what makes it
fast on CPU and GPU alike. :func:`fwht_butterfly` is the plain O(n log n) butterfly, kept as the
reference. On CUDA, when the ``fast_hadamard_transform`` package (Dao-AILab) imports, its kernel is
used instead; any import failure falls back silently to the matmul form.

The transform is symmetric and orthonormal, so it is its own inverse.

The randomized transform ``R x = H D x`` (``D`` diagonal of random signs from a shared seed) is
also orthonormal, with inverse ``D H y``.
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import math
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

__all__ = ["MAX_FACTOR_LOG2", "NATIVE_CXXFLAGS", "build_native_library", "cuda_kernel_available", "fwht",
           "fwht_butterfly", "fwht_into", "hadamard_matrix", "native_fwht_into", "native_kernel", "random_signs",
           "rht", "irht"]

_log = logging.getLogger(__name__)

#: Largest dense factor is 2**5 = 32: 32x32 matmuls balance flops and memory passes.
MAX_FACTOR_LOG2 = 5

try:  # optional CUDA kernel
    from fast_hadamard_transform import hadamard_transform as _fht_cuda  # type: ignore
except Exception:  # noqa: BLE001 - any failure (missing package, bad build) means fall back
    _fht_cuda = None

_MATRICES: Dict[Tuple[int, torch.dtype, torch.device], torch.Tensor] = {}
_PLANS: Dict[Tuple[int, torch.dtype, torch.device, bool], List[Tuple[int, torch.Tensor]]] = {}


def cuda_kernel_available() -> bool:
    """True when the ``fast_hadamard_transform`` CUDA kernel imported."""
    return _fht_cuda is not None


def _check_block(block: int) -> int:
    if not isinstance(block, int) or block < 1 or block & (block - 1):
        raise ValueError(f"block={block!r}: must be a power of two >= 1")
    return block.bit_length() - 1


def hadamard_matrix(size: int, dtype: torch.dtype = torch.float32,
                    device: torch.device | str = "cpu", normalized: bool = True) -> torch.Tensor:
    """The Sylvester Hadamard matrix ``H_size`` (divided by sqrt(size) when ``normalized``).

    Example::
        >>> hadamard_matrix(2, normalized=False).tolist()
        [[1.0, 1.0], [1.0, -1.0]]
    """
    _check_block(size)
    device = torch.device(device)
    key = (size, dtype, device) if normalized else None
    if key is not None and key in _MATRICES:
        return _MATRICES[key]
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < size:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    if normalized:
        h = h / math.sqrt(size)
    h = h.to(dtype=dtype, device=device)
    if key is not None:
        _MATRICES[key] = h
    return h


def _factors(log2_block: int) -> List[int]:
    """Split 2**log2_block into near-equal power-of-two factors of at most 2**MAX_FACTOR_LOG2."""
    count = max(1, math.ceil(log2_block / MAX_FACTOR_LOG2))
    sizes = [log2_block // count + (1 if i < log2_block % count else 0) for i in range(count)]
    return [1 << s for s in sizes if s > 0]


def _factor_matrices(block: int, dtype: torch.dtype, device: torch.device,
                     normalized: bool = True) -> List[Tuple[int, torch.Tensor]]:
    """[(post, H_f)] for each factor, outermost first (``post`` = product of the inner factors)."""
    key = (block, dtype, device, normalized)
    plan = _PLANS.get(key)
    if plan is None:
        plan, post = [], block
        for f in _factors(_check_block(block)):
            post //= f
            plan.append((post, hadamard_matrix(f, dtype, device, normalized)))
        _PLANS[key] = plan
    return plan


def fwht_into(src: torch.Tensor, block: int, out: torch.Tensor, scratch: torch.Tensor,
              scale: float = 1.0, normalized: bool = True) -> torch.Tensor:
    """:func:`fwht` (times ``scale``) written into ``out``, allocating nothing.

    Args:
        src: flat contiguous floating tensor, numel a multiple of ``block``; left unchanged.
        block: power-of-two block size.
        out: flat contiguous tensor like ``src`` for the result (distinct from ``src``).
        scratch: flat contiguous tensor like ``src`` (distinct from ``src`` and ``out``), clobbered.
        scale: factor folded into one of the small dense factors (free).
        normalized: False: the unnormalised ``H_block`` (entries +-1, no ``1 / sqrt(block)``).
            With ``scale`` 1, float32 integers whose transform stays below 2**24 in magnitude
            are then transformed exactly (every product and partial sum is such an integer,
            whatever order the GEMMs sum in), unless float32 matmuls are allowed a lower
            precision (``torch.set_float32_matmul_precision``, TF32 on CUDA).

    Returns:
        ``out``.
    """
    _check_block(block)
    n = src.numel()
    if n % block:
        raise ValueError(f"x has {n} values: must be a multiple of block={block}")
    if block == 1 or n == 0:
        return torch.mul(src, scale, out=out) if scale != 1.0 else out.copy_(src)
    if _fht_cuda is not None and src.is_cuda and src.dtype in (torch.float32, torch.float16, torch.bfloat16):
        factor = scale / math.sqrt(block) if normalized else scale
        return out.copy_(_fht_cuda(src.view(-1, block), factor).reshape(-1))
    plan = _factor_matrices(block, src.dtype, src.device, normalized)
    # ping-pong so that the last factor writes ``out``: ..., out, scratch, out
    targets = [out if (len(plan) - 1 - i) % 2 == 0 else scratch for i in range(len(plan))]
    cur = src
    for i, ((post, h), dst) in enumerate(zip(plan, targets)):
        f = h.shape[0]
        if i == len(plan) - 1 and scale != 1.0:
            h = h * scale
        if post == 1:  # innermost axis: rows @ H (H is symmetric), one large GEMM
            torch.mm(cur.view(-1, f), h, out=dst.view(-1, f))
        else:  # H @ each (f, post) slab: a batched GEMM
            torch.matmul(h, cur.view(-1, f, post), out=dst.view(-1, f, post))
        cur = dst
    return out


# ----------------------------------------------------------------- optional native CPU kernel
#: C++ source of the opt-in CPU kernel (``native_kernel``): an in-cache butterfly per block (the
#: first four stages in AVX-512 registers when the compiler targets it), with optional
#: per-coordinate factors before and after and an offset on the first value of each block, so the
#: sign flips and decode's affine map cost no extra memory pass.
_NATIVE_SRC = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
/* For each block b of `block` values (a power of two):
     dst[b] = post * (scale * H_B (pre * src[b]) - off0 * e_0) + add
   (H_B the unnormalised Sylvester matrix; pre, post, add optional, per coordinate; src float32
   or, with src_int32, int32). With sumsq, *sumsq = sum of dst^2 (double). src may equal dst. */
template <typename T>
static void fwht_blocks(const T* src, const float* pre, const float* post, const float* add, float* dst,
                        int64_t nblocks, int64_t block, float scale, float off0, double* sumsq) {
    float* buf = (float*)aligned_alloc(64, ((block * sizeof(float) + 63) / 64) * 64);
    if (!buf) return;
    double acc = 0.0;
    for (int64_t b = 0; b < nblocks; ++b) {
        const int64_t base = b * block;
        const T* s = src + base;
        if (pre) { for (int64_t i = 0; i < block; ++i) buf[i] = (float)s[i] * pre[base + i]; }
        else { for (int64_t i = 0; i < block; ++i) buf[i] = (float)s[i]; }
        int64_t h = 1;
#if defined(__AVX512F__)
        if (block >= 16) {  /* stages h = 1, 2, 4, 8 inside one register: v' = perm(v) + sign * v */
            const __m512i p1 = _mm512_set_epi32(14,15,12,13,10,11,8,9,6,7,4,5,2,3,0,1);
            const __m512i p2 = _mm512_set_epi32(13,12,15,14,9,8,11,10,5,4,7,6,1,0,3,2);
            const __m512i p4 = _mm512_set_epi32(11,10,9,8,15,14,13,12,3,2,1,0,7,6,5,4);
            const __m512i p8 = _mm512_set_epi32(7,6,5,4,3,2,1,0,15,14,13,12,11,10,9,8);
            const __m512 s1 = _mm512_set_ps(-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1);
            const __m512 s2 = _mm512_set_ps(-1,-1,1,1,-1,-1,1,1,-1,-1,1,1,-1,-1,1,1);
            const __m512 s4 = _mm512_set_ps(-1,-1,-1,-1,1,1,1,1,-1,-1,-1,-1,1,1,1,1);
            const __m512 s8 = _mm512_set_ps(-1,-1,-1,-1,-1,-1,-1,-1,1,1,1,1,1,1,1,1);
            for (int64_t i = 0; i < block; i += 16) {
                __m512 v = _mm512_load_ps(buf + i);
                v = _mm512_fmadd_ps(v, s1, _mm512_permutexvar_ps(p1, v));
                v = _mm512_fmadd_ps(v, s2, _mm512_permutexvar_ps(p2, v));
                v = _mm512_fmadd_ps(v, s4, _mm512_permutexvar_ps(p4, v));
                v = _mm512_fmadd_ps(v, s8, _mm512_permutexvar_ps(p8, v));
                _mm512_store_ps(buf + i, v);
            }
            h = 16;
        }
#endif
        for (; h < block; h <<= 1) {
            for (int64_t i = 0; i < block; i += 2 * h) {
                for (int64_t j = i; j < i + h; ++j) {
                    const float x = buf[j], y = buf[j + h];
                    buf[j] = x + y;
                    buf[j + h] = x - y;
                }
            }
        }
        for (int64_t i = 0; i < block; ++i) buf[i] *= scale;
        buf[0] -= off0;
        if (post) { for (int64_t i = 0; i < block; ++i) buf[i] *= post[base + i]; }
        if (add) { for (int64_t i = 0; i < block; ++i) buf[i] += add[base + i]; }
        if (sumsq) {
            float part = 0.0f;  /* per block in float (vectorised), blocks summed in double */
            for (int64_t i = 0; i < block; ++i) part += buf[i] * buf[i];
            acc += (double)part;
        }
        memcpy(dst + base, buf, block * sizeof(float));
    }
    free(buf);
    if (sumsq) *sumsq = acc;
}

extern "C" void hina_fwht(const void* src, int32_t src_int32, const float* pre, const float* post,
                          const float* add, float* dst, int64_t nblocks, int64_t block, float scale,
                          float off0, double* sumsq) {
    if (src_int32)
        fwht_blocks((const int32_t*)src, pre, post, add, dst, nblocks, block, scale, off0, sumsq);
    else
        fwht_blocks((const float*)src, pre, post, add, dst, nblocks, block, scale, off0, sumsq);
}
"""
_NATIVE_LOCK = threading.Lock()
_NATIVE_LIBS: Dict[str, Optional[ctypes.CDLL]] = {}
_NATIVE_MAX_BLOCK = 1 << 24
#: flags of the opt-in native kernels; -ffp-contract=off keeps the float operations as written
#: (explicit fmaf where the eager path fuses), so the quantiser matches the eager one bit for bit
NATIVE_CXXFLAGS = ("-O3", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-shared", "-fPIC")


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return ""


def _check_private(path: Path) -> None:
    """Refuse (PermissionError) a cache directory or library that another user owns or could
    write: the cache's default sits in the shared temporary directory, where anyone may create
    ``hina-<uid>`` first, and a library planted there would run as this process."""
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise PermissionError(f"{path}: owned by uid {st.st_uid} with mode {st.st_mode & 0o777:o}; "
                              f"the native kernels load only from a path of this user (uid {os.getuid()}) "
                              "that no group or other may write (set HINA_CACHE_DIR to such a directory)")


def build_native_library(tag: str, source: str) -> Optional[ctypes.CDLL]:
    """Compile ``source`` (C++) once with ``g++`` (``$CXX``) and :data:`NATIVE_CXXFLAGS` into a
    cache directory (``$HINA_CACHE_DIR``, else ``<tmp>/hina-<uid>``; keyed by the source, flags
    and this CPU's flags) and load it; later calls and processes reuse it. Returns None, after
    one logged warning per ``tag``, when there is no compiler, the build or load fails, or the
    cache directory or a library in it is not this user's alone (:func:`_check_private`)."""
    with _NATIVE_LOCK:
        if tag in _NATIVE_LIBS:
            return _NATIVE_LIBS[tag]
        lib: Optional[ctypes.CDLL] = None
        try:
            key = "\0".join([source, " ".join(NATIVE_CXXFLAGS), _cpu_flags()])
            digest = hashlib.sha256(key.encode()).hexdigest()[:16]
            cache = Path(os.environ.get("HINA_CACHE_DIR") or Path(tempfile.gettempdir()) / f"hina-{os.getuid()}")
            cache.mkdir(mode=0o700, parents=True, exist_ok=True)
            _check_private(cache)
            lib_path = cache / f"{tag}_{digest}.so"
            if lib_path.exists():
                _check_private(lib_path)
            else:
                src_path = cache / f"{tag}_{digest}.{os.getpid()}.cpp"
                tmp = cache / f"{tag}_{digest}.{os.getpid()}.so"
                src_path.write_text(source)
                try:
                    subprocess.run([os.environ.get("CXX", "g++"), *NATIVE_CXXFLAGS, str(src_path), "-o", str(tmp)],
                                   check=True, capture_output=True, timeout=300)
                    os.replace(tmp, lib_path)  # atomic: concurrent builders never see half a file
                finally:
                    src_path.unlink(missing_ok=True)
                    tmp.unlink(missing_ok=True)
            lib = ctypes.CDLL(str(lib_path))
        except Exception as exc:  # noqa: BLE001 - no compiler, bad flags, read-only cache: fall back
            detail = getattr(exc, "stderr", b"") or b""
            _log.warning("native kernel %s unavailable (%s: %s); using the eager path", tag,
                         type(exc).__name__, (str(exc) + " " + detail.decode(errors="replace")).strip()[:400])
            lib = None
        _NATIVE_LIBS[tag] = lib
        return lib


def native_kernel() -> Optional[object]:
    """The native FWHT function (see :func:`build_native_library`), or None when unavailable.
    Only callers that opted in (e.g. ``ThcCodec(compiled=True)``) pay the ~1 s build."""
    lib = build_native_library("hina_fwht", _NATIVE_SRC)
    if lib is None:
        return None
    fn = lib.hina_fwht
    fn.argtypes = ([ctypes.c_void_p, ctypes.c_int32] + [ctypes.c_void_p] * 4
                   + [ctypes.c_int64, ctypes.c_int64, ctypes.c_float, ctypes.c_float, ctypes.c_void_p])
    fn.restype = None
    return fn


def _native_ok(t: Optional[torch.Tensor], n: int, dtypes: Tuple[torch.dtype, ...] = (torch.float32,)) -> bool:
    return t is None or (t.dtype in dtypes and t.device.type == "cpu" and t.is_contiguous() and t.numel() == n)


def native_fwht_into(src: torch.Tensor, block: int, out: torch.Tensor, scale: float = 1.0,
                     pre: Optional[torch.Tensor] = None, post: Optional[torch.Tensor] = None,
                     offset0: float = 0.0, add: Optional[torch.Tensor] = None,
                     sumsq: bool = False) -> Optional[float]:
    """``out = post * (fwht(pre * src) * scale - offset0 * e_0 per block) + add`` with the native
    kernel, in one memory pass (``pre``, ``post`` default to ones, ``add`` to zeros).

    Args:
        src: flat contiguous float32 or int32 CPU tensor, numel a multiple of ``block``.
        out: flat contiguous float32 CPU tensor like ``src`` (may be ``src`` when float32).
        pre, post, add: optional flat contiguous float32 CPU tensors like ``src``.
        sumsq: also return ``sum(out ** 2)`` (accumulated per block in float32, over blocks in
            float64).

    Returns:
        None (nothing written) when the kernel is unavailable or the tensors do not qualify; the
        caller then uses :func:`fwht_into`. Else ``sum(out ** 2)`` when ``sumsq``, or 0.0. Not
        bit-identical to :func:`fwht_into` (another summation order): within a few float32 ulps
        of the result's scale.
    """
    n = src.numel()
    _check_block(block)
    if (block > _NATIVE_MAX_BLOCK or n % block or not _native_ok(src, n, (torch.float32, torch.int32))
            or not all(_native_ok(t, n) for t in (out, pre, post, add))):
        return None
    fn = native_kernel()
    if fn is None:
        return None
    acc = ctypes.c_double(0.0)
    if n:
        ptr = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
        fn(src.data_ptr(), int(src.dtype == torch.int32), ptr(pre), ptr(post), ptr(add), out.data_ptr(),
           n // block, block, scale / math.sqrt(block), offset0, ctypes.byref(acc) if sumsq else None)
    return acc.value


def fwht(x: torch.Tensor, block: int) -> torch.Tensor:
    """Orthonormal Walsh-Hadamard transform of each block of ``block`` contiguous values.

    Args:
        x: floating tensor whose numel is a multiple of ``block`` (flattened view is used).
        block: power-of-two block size.

    Returns:
        New flat tensor ``(H_block / sqrt(block)) @ x_j`` for every block ``x_j``.

    Example::
        >>> fwht(torch.tensor([1.0, 1.0]), 2).tolist()  # doctest: +ELLIPSIS
        [1.414..., 0.0]
    """
    _check_block(block)
    flat = x.reshape(-1)
    if flat.numel() % block:
        raise ValueError(f"x has {flat.numel()} values: must be a multiple of block={block}")
    if block == 1 or flat.numel() == 0:
        return flat.clone()
    flat = flat.contiguous()
    out = torch.empty_like(flat)
    scratch = torch.empty_like(flat) if len(_factors(block.bit_length() - 1)) > 1 else out
    return fwht_into(flat, block, out, scratch)


def fwht_butterfly(x: torch.Tensor, block: int) -> torch.Tensor:
    """Reference O(n log n) butterfly transform (same result as :func:`fwht`)."""
    _check_block(block)
    out = x.reshape(-1, block).clone()
    h = 1
    while h < block:
        v = out.view(-1, block // (2 * h), 2, h)
        a, b = v[:, :, 0, :].clone(), v[:, :, 1, :].clone()
        v[:, :, 0, :] = a + b
        v[:, :, 1, :] = a - b
        h *= 2
    return (out / math.sqrt(block)).reshape(-1)


def random_signs(seed: int, numel: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu") -> torch.Tensor:
    """Shared random +-1 vector: drawn on the CPU generator so every device gets the same signs."""
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    bits = torch.randint(0, 2, (numel,), generator=gen, dtype=torch.int8)
    return (1 - 2 * bits).to(dtype=dtype, device=device)


def rht(x: torch.Tensor, signs: torch.Tensor, block: int) -> torch.Tensor:
    """Randomized Hadamard transform ``H (signs * x)`` blockwise (``x`` flat, padded)."""
    return fwht(x * signs, block)


def irht(y: torch.Tensor, signs: torch.Tensor, block: int) -> torch.Tensor:
    """Inverse of :func:`rht`: ``signs * H y``."""
    out = fwht(y, block)
    out *= signs
    return out
