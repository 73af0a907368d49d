"""Block-scaled fixed point for the switch's int32 SUM lanes (SwitchML-style exponent agreement).

Each block of ``block`` values gets one exponent ``E`` with ``max|x| < 2**E``; the workers agree on
the MAX of their exponents (switch MAX over ``E + EXPONENT_BIAS`` as uint32), then convert with the
shift ``s = 30 - E - ceil(log2 n)``::

    q = round(x * 2**s)   (nearest, or stochastic when asked: unbiased)

Overflow guarantee: ``|x| < 2**E`` gives ``|x 2**s| < 2**(30 - c)`` with ``c = ceil(log2 n)``, and
rounding cannot pass the integer ``2**(30 - c)``, so ``|q| <= 2**(30 - c)`` and the sum of ``n``
workers satisfies ``|sum q| <= n 2**(30 - c) <= 2**30 < 2**31``: no int32 lane can overflow.
(One bit is spent on this margin; rounding up to ``2**(31-c)`` could reach exactly ``2**31``.)
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, Optional, Sequence

import torch

from .base import Codec, EncodedLanes, LaneOp, LaneStream, check_aggregated, check_gradient, to_u32_lanes
from .errors import CodecError, NonFiniteGradientError

__all__ = ["EXPONENT_BIAS", "EXPONENT_MIN", "FixedPointCodec", "agreement_codes", "block_exponents",
           "exponents_from_codes", "from_fixed", "headroom_bits", "shifts", "to_fixed"]

#: Added to exponents so they are non-negative uint32 for the switch MAX.
EXPONENT_BIAS = 1 << 10
#: Exponent of an all-zero block (below every float32 exponent).
EXPONENT_MIN = -(1 << 9)
#: |q| <= 2**(LANE_MAGNITUDE_BITS - c): the bound proved in the module docstring.
LANE_MAGNITUDE_BITS = 30
_NONFINITE_CODE = (1 << 32) - 1
#: Largest shift: 2**126 is a finite float32. Tiny blocks (|x| < 2**-96) then use fewer bits,
#: which only lowers |q| (the overflow bound still holds); all-zero blocks stay zero.
MAX_SHIFT = 126


def headroom_bits(n_workers: int) -> int:
    """``ceil(log2 n_workers)``: bits reserved so ``n_workers`` values sum without overflow."""
    if not isinstance(n_workers, int) or n_workers < 1:
        raise ValueError(f"n_workers={n_workers!r}: must be an int >= 1")
    return (n_workers - 1).bit_length()


def _pad_blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    pad = -x.numel() % block
    return torch.cat([x, x.new_zeros(pad)]) if pad else x


def block_exponents(x: torch.Tensor, block: int) -> torch.Tensor:
    """Per block, the least ``E`` (int64) with ``max|x| < 2**E``; EXPONENT_MIN for zero blocks.

    Non-finite blocks get no exponent: the caller checks finiteness (see agreement_codes).
    """
    if not isinstance(block, int) or block < 1:
        raise ValueError(f"block={block!r}: must be an int >= 1")
    amax = _pad_blocks(x.reshape(-1), block).view(-1, block).abs().amax(dim=1)
    _, exp = torch.frexp(amax)  # amax = m * 2**exp with m in [0.5, 1): amax < 2**exp
    exp = exp.to(torch.int64)
    return torch.where(amax > 0, exp, torch.full_like(exp, EXPONENT_MIN))


def agreement_codes(x: torch.Tensor, block: int, key: Hashable = 0) -> torch.Tensor:
    """uint32 MAX codes ``E + EXPONENT_BIAS`` per block.

    Raises:
        NonFiniteGradientError: a value is NaN or Inf (its block's max is not finite).
    """
    amax = _pad_blocks(x.reshape(-1), block).view(-1, block).abs().amax(dim=1) if x.numel() else x.new_zeros(0)
    if amax.numel() and not bool(torch.isfinite(amax).all()):
        bad = int((~torch.isfinite(amax)).sum())
        raise NonFiniteGradientError(key, "local", f"{bad} block(s) of {block} values")
    return (block_exponents(x, block) + EXPONENT_BIAS).to(torch.uint32)


def exponents_from_codes(codes: torch.Tensor, key: Hashable = 0) -> torch.Tensor:
    """Agreed exponents (int64) from MAX-reduced codes; refuses a poisoned code."""
    e = to_u32_lanes(codes).view(torch.int32).to(torch.int64) & ((1 << 32) - 1)
    if e.numel() and bool((e == _NONFINITE_CODE).any()):
        raise NonFiniteGradientError(key, "agreed")
    return e - EXPONENT_BIAS


def shifts(exponents: torch.Tensor, n_workers: int) -> torch.Tensor:
    """Shift ``s = min(30 - E - ceil(log2 n), MAX_SHIFT)`` per block (int64)."""
    return (LANE_MAGNITUDE_BITS - exponents - headroom_bits(n_workers)).clamp(max=MAX_SHIFT)


def to_fixed(x: torch.Tensor, shift: torch.Tensor, block: int,
             generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """int32 ``round(x * 2**shift)`` per block (stochastic rounding when ``generator`` is given).

    Args:
        x: flat float tensor.
        shift: int64 shift per block (``ceil(numel / block)`` of them).
        block: block size.
        generator: RNG for unbiased stochastic rounding; None rounds to nearest.

    Returns:
        int32 tensor of ``x.numel()`` values.
    """
    numel = x.numel()
    scale = torch.ldexp(torch.ones_like(shift, dtype=torch.float64), shift).to(torch.float32)
    y = _pad_blocks(x.reshape(-1).to(torch.float32), block).view(-1, block) * scale[:, None]
    if generator is None:
        y = y.round_()
    else:
        y = y.add_(torch.rand(y.shape, generator=generator, device=y.device)).floor_()
    return y.reshape(-1)[:numel].to(torch.int32)


def from_fixed(q: torch.Tensor, shift: torch.Tensor, block: int, divisor: float = 1.0) -> torch.Tensor:
    """float32 ``q * 2**-shift / divisor`` per block (the inverse of :func:`to_fixed`)."""
    numel = q.numel()
    scale = torch.ldexp(torch.ones_like(shift, dtype=torch.float64), -shift) / divisor
    y = _pad_blocks(q.reshape(-1).to(torch.float64), block).view(-1, block) * scale[:, None]
    return y.reshape(-1)[:numel].to(torch.float32)


class FixedPointCodec(Codec):
    """Dense fixed point: one int32 SUM lane per value, block exponents agreed by MAX.

    Args:
        n_workers: workers summed by the switch.
        block: values sharing one exponent (SwitchML packs 64 per packet).
        stochastic: unbiased stochastic rounding instead of round-to-nearest.
        rank: seeds this worker's rounding noise.

    Example::
        >>> c = FixedPointCodec(2)
        >>> x = torch.randn(100)
        >>> agreed = c.agreement(x)
        >>> [s.op for s in c.encode(x, agreed).streams]
        [<LaneOp.SUM: 'sum'>]
    """

    name = "fixed"

    def __init__(self, n_workers: int, block: int = 256, stochastic: bool = False, rank: int = 0) -> None:
        super().__init__(n_workers)
        if not isinstance(block, int) or block < 1:
            raise ValueError(f"block={block!r}: must be an int >= 1")
        self.block, self.stochastic, self.rank = block, stochastic, rank
        self._generators: Dict[torch.device, torch.Generator] = {}
        self.log_config()

    def _generator(self, device: torch.device) -> Optional[torch.Generator]:
        if not self.stochastic:
            return None
        if device not in self._generators:
            self._generators[device] = torch.Generator(device=device).manual_seed(self.rank)
        return self._generators[device]

    def snapshot(self, key: Hashable = 0) -> Dict[torch.device, torch.Tensor]:
        """The rounding RNGs' states (stochastic rounding; shared by the buckets): the codec has
        no other state between calls (see :meth:`Codec.snapshot`)."""
        return {device: gen.get_state() for device, gen in self._generators.items()}

    def restore(self, key: Hashable, snapshot: Dict[torch.device, torch.Tensor]) -> None:
        """The rounding RNGs as :meth:`snapshot` found them (one made since is dropped: it is
        made again from its seed)."""
        for device in list(self._generators):
            if device in snapshot:
                self._generators[device].set_state(snapshot[device])
            else:
                del self._generators[device]

    def agreement(self, grad: torch.Tensor, key: Hashable = 0) -> torch.Tensor:
        """Block exponent codes of ``grad`` (uint32, one per block)."""
        return agreement_codes(check_gradient(grad), self.block, key)

    def encode(self, grad: torch.Tensor, agreed: torch.Tensor, key: Hashable = 0) -> EncodedLanes:
        """One int32 SUM stream of ``grad.numel()`` lanes."""
        x = check_gradient(grad)
        blocks = -(-x.numel() // self.block)
        if agreed.numel() != blocks:
            raise CodecError(f"agreed has {agreed.numel()} exponents: need one per block of "
                             f"{self.block} values ({blocks})")
        shift = shifts(exponents_from_codes(agreed, key).to(x.device), self.n_workers)
        q = to_fixed(x, shift, self.block, self._generator(x.device))
        meta = {"numel": x.numel(), "shape": tuple(grad.shape), "dtype": grad.dtype}
        return EncodedLanes([LaneStream(LaneOp.SUM, q, count=q.numel(), name="fixed_values")], meta)

    def decode(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
               meta: Optional[Dict[str, Any]] = None) -> torch.Tensor:
        """Mean from the int32 sums."""
        if meta is None:
            raise CodecError("meta: pass the meta returned with encode()")
        check_aggregated(aggregated, [(meta["numel"], (torch.int32, torch.int64))], self.name)
        shift = shifts(exponents_from_codes(agreed, key).to(aggregated[0].device), self.n_workers)
        x = from_fixed(aggregated[0], shift, self.block, float(self.n_workers))
        return x.reshape(meta["shape"]).to(meta["dtype"])
