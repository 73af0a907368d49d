"""THC's rounding of rotated, scaled values to the table's levels, the parts every
implementation shares: the per-integer rounding tables (:func:`rounding_luts`, used by the eager
path, the native quantiser and the Triton kernels), the opt-in native one-pass quantiser
(:func:`native_quantiser`, ``ThcCodec(compiled=True)``), the packing of whole-float indices
(:func:`pack_floats_into`) and THC's literal two-stage rounding as the tests' reference
(:func:`quantise_two_stage`). Why one draw reproduces the two stages:
:mod:`worker.codecs.thc_table`.
"""
from __future__ import annotations

import ctypes
from typing import Any, Dict, Optional, Sequence

import torch

from .hadamard import build_native_library

__all__ = ["QUANTISER_SRC", "native_quantiser", "pack_floats_into", "quantise_two_stage",
           "rounding_luts"]

#: C++ source of the opt-in quantiser (``ThcCodec(compiled=True)``): the eager path's float
#: operations in the same order (``fmaf`` where ATen fuses, no other contraction), one pass.
QUANTISER_SRC = r"""
#include <stdint.h>
#include <math.h>
#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif
/* THC quantiser in one pass (the eager path's float operations, in the same order):
   u = clamp(fma(y, a, half_g), 0, g); j = int(u); v = floor(min(fma(r, 2**-16, offset[j] + slope[j] u), top));
   nibbles packed two per byte (even coordinate high); with deq, y -= deq[v] (error feedback).
   n is even or the last byte gets a zero low nibble. offset/slope have nlut entries, deq 16. */
static inline uint8_t q1(float* y, int16_t r, float a, float half_g, float g, float top,
                         const float* offset, const float* slope, const float* deq) {
    float u = fmaf(*y, a, half_g);
    u = u < 0.0f ? 0.0f : u;
    u = u > g ? g : u;
    const int32_t j = (int32_t)u;
    float v = offset[j] + slope[j] * u;
    v = fmaf((float)r, 1.52587890625e-05f, v);
    v = v > top ? top : v;
    const int32_t q = (int32_t)floorf(v);
    if (deq) *y -= deq[q];
    return (uint8_t)q;
}

extern "C" void hina_thc_quantise(float* y, const int16_t* r, int64_t n, float a, float half_g, float g,
                                  float top, const float* offset, const float* slope, int64_t nlut,
                                  const float* deq, uint8_t* packed) {
    int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    if (nlut <= 32) {
        float ot[32] = {0}, st[32] = {0}, dt[16] = {0};
        for (int64_t k = 0; k < nlut; ++k) { ot[k] = offset[k]; st[k] = slope[k]; }
        if (deq) for (int k = 0; k < 16; ++k) dt[k] = deq[k];
        const __m512 olo = _mm512_loadu_ps(ot), ohi = _mm512_loadu_ps(ot + 16);
        const __m512 slo = _mm512_loadu_ps(st), shi = _mm512_loadu_ps(st + 16);
        const __m512 dv = _mm512_loadu_ps(dt);
        const __m512 va = _mm512_set1_ps(a), vh = _mm512_set1_ps(half_g), vz = _mm512_setzero_ps();
        const __m512 vg = _mm512_set1_ps(g), vt = _mm512_set1_ps(top), vs = _mm512_set1_ps(1.52587890625e-05f);
        const __m512i lo32 = _mm512_set1_epi64(0xFFFFFFFFLL);
        for (; i + 16 <= n; i += 16) {
            __m512 yv = _mm512_loadu_ps(y + i);
            __m512 u = _mm512_fmadd_ps(yv, va, vh);
            u = _mm512_min_ps(_mm512_max_ps(u, vz), vg);
            const __m512i j = _mm512_cvttps_epi32(u);
            const __m512 off = _mm512_permutex2var_ps(olo, j, ohi);
            const __m512 sl = _mm512_permutex2var_ps(slo, j, shi);
            __m512 v = _mm512_add_ps(off, _mm512_mul_ps(sl, u));
            const __m256i r16 = _mm256_loadu_si256((const __m256i*)(r + i));
            const __m512 rv = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(r16));
            v = _mm512_fmadd_ps(rv, vs, v);
            v = _mm512_min_ps(v, vt);
            v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
            const __m512i q = _mm512_cvttps_epi32(v);
            if (deq) _mm512_storeu_ps(y + i, _mm512_sub_ps(yv, _mm512_permutexvar_ps(q, dv)));
            const __m512i pairs = _mm512_or_si512(_mm512_slli_epi64(_mm512_and_si512(q, lo32), 4),
                                                  _mm512_srli_epi64(q, 32));
            _mm_storel_epi64((__m128i*)(packed + i / 2), _mm512_cvtepi64_epi8(pairs));
        }
    }
#endif
    for (; i + 2 <= n; i += 2) {
        const uint8_t hi = q1(y + i, r[i], a, half_g, g, top, offset, slope, deq);
        const uint8_t lo = q1(y + i + 1, r[i + 1], a, half_g, g, top, offset, slope, deq);
        packed[i / 2] = (uint8_t)((hi << 4) | lo);
    }
    if (i < n) packed[i / 2] = (uint8_t)(q1(y + i, r[i], a, half_g, g, top, offset, slope, deq) << 4);
}
"""


def native_quantiser() -> Optional[Any]:
    """The native quantiser (built with g++ once, then cached on disk), or None when it cannot
    be built."""
    lib = build_native_library("hina_thc_quantise", QUANTISER_SRC)
    if lib is None:
        return None
    fn = lib.hina_thc_quantise
    fn.argtypes = ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64] + [ctypes.c_float] * 4
                   + [ctypes.c_void_p] * 2 + [ctypes.c_int64] + [ctypes.c_void_p] * 2)
    fn.restype = None
    return fn


def pack_floats_into(v: torch.Tensor, packed: torch.Tensor, scratch: torch.Tensor) -> None:
    """:func:`~worker.codecs.packing.pack_nibbles` of whole float32 values in [0, 15] into
    ``packed`` (``ceil(n / 2)`` bytes): ``16 v[2i] + v[2i+1]`` is exact in float32."""
    n = v.numel()
    half = n // 2
    pairs = scratch[:half]
    torch.add(v[1:2 * half:2], v[0:2 * half:2], alpha=16.0, out=pairs)
    packed[:half].copy_(pairs)
    if n % 2:
        torch.mul(v[n - 1:], 16.0, out=scratch[half:half + 1])
        packed[half:].copy_(scratch[half:half + 1])


def rounding_luts(table: Sequence[int]) -> Dict[str, torch.Tensor]:
    """Per-integer j in 0..g: ``slope = 1/gap``, ``offset = k - table[k]/gap + 1/2 + 2**-17`` of j's interval, and
    the float levels. For j == g the last interval is used (u == g gives index 2**b - 1)."""
    levels = torch.tensor(table, dtype=torch.float64)
    ints = torch.arange(int(table[-1]) + 1, dtype=torch.float64)
    k = (torch.searchsorted(levels, ints, right=True) - 1).clamp_(max=len(table) - 2)
    gap = levels[k + 1] - levels[k]
    # the offset turns the int16 draws (m - 2**15) / 2**16 into (m + 1/2) / 2**16
    return {"slope": (1.0 / gap).float(), "offset": (k - levels[k] / gap + 0.5 + 2.0 ** -17).float(),
            "levels": levels.float()}


def quantise_two_stage(u: torch.Tensor, table: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """THC's literal two-stage rounding (reference for tests): integer, then table level.

    Args:
        u: values in [0, table[-1]].
        table: increasing integer levels.
        generator: RNG for the two draws.

    Returns:
        int64 table indices.
    """
    levels = torch.tensor(table, dtype=torch.float32, device=u.device)
    low = u.floor()
    z = low + (torch.rand(u.shape, generator=generator, device=u.device) < (u - low))
    k = (torch.searchsorted(levels, z, right=True) - 1).clamp_(max=len(table) - 2)
    a, b = levels[k], levels[k + 1]
    up = torch.rand(u.shape, generator=generator, device=u.device) < (z - a) / (b - a)
    return k + up
