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

import math
from typing import Dict, List, Tuple

import torch

__all__ = ["MAX_FACTOR_LOG2", "cuda_kernel_available", "fwht", "fwht_butterfly", "fwht_into", "hadamard_matrix",
           "random_signs", "rht", "irht"]

#: Largest dense factor is 2**5 = 32: 32x32 matmuls balance flops and memory passes.
MAX_FACTOR_LOG2 = 5

try:  # optional CUDA kernel
    from fast_hadamard_transform import hadamard_transform as _fht_cuda  # type: ignore
except Exception:  # noqa: BLE001 - any failure (missing package, bad build) means fall back
    _fht_cuda = None

_MATRICES: Dict[Tuple[int, torch.dtype, torch.device], torch.Tensor] = {}
_PLANS: Dict[Tuple[int, torch.dtype, torch.device], List[Tuple[int, torch.Tensor]]] = {}


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


def _factor_matrices(block: int, dtype: torch.dtype, device: torch.device) -> List[Tuple[int, torch.Tensor]]:
    """[(post, H_f)] for each factor, outermost first (``post`` = product of the inner factors)."""
    key = (block, dtype, device)
    plan = _PLANS.get(key)
    if plan is None:
        plan, post = [], block
        for f in _factors(_check_block(block)):
            post //= f
            plan.append((post, hadamard_matrix(f, dtype, device)))
        _PLANS[key] = plan
    return plan


def fwht_into(src: torch.Tensor, block: int, out: torch.Tensor, scratch: torch.Tensor,
              scale: float = 1.0) -> torch.Tensor:
    """:func:`fwht` (times ``scale``) written into ``out``, allocating nothing.

    Args:
        src: flat contiguous floating tensor, numel a multiple of ``block``; left unchanged.
        block: power-of-two block size.
        out: flat contiguous tensor like ``src`` for the result (distinct from ``src``).
        scratch: flat contiguous tensor like ``src`` (distinct from ``src`` and ``out``), clobbered.
        scale: factor folded into one of the small dense factors (free).

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
        return out.copy_(_fht_cuda(src.view(-1, block), scale / math.sqrt(block)).reshape(-1))
    plan = _factor_matrices(block, src.dtype, src.device)
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
