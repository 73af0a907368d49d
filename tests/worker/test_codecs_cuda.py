"""Every registered codec on CUDA tensors: sparse and dense, the same contract as on the CPU.

Runs where a GPU is present (``scripts/gpu_check.sh`` on a GPU machine); skips elsewhere (CI has
no GPU; the CPU variants of the same checks are in ``test_codec_contract.py`` and the codecs'
own test files). Each codec reduces the same gradients once with CPU tensors and once with CUDA
tensors through :func:`reference_allreduce` (the switch's arithmetic): the CUDA result must stay
on the gradient's device and dtype, agree across workers, and be as close to the true mean as
the CPU result is. The exact sparse codecs (``lossless``, ``block_sparse``) must give the CPU's
result bit for bit: they are deterministic, and a CUDA worker must decode what a CPU worker
decodes from the same sums.
"""
import pytest
import torch

from hina import codecs as names
from hina.worker.codecs import reference_allreduce
from hina.worker.codecs.registry import build

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU (scripts/gpu_check.sh runs it there)")

CODECS = names.names(kind="codec")
EXACT = {"lossless", "block_sparse"}
WORKERS = 3


def sparse_grads(seed: int, numel: int = 4096, density: float = 0.02):
    """Per-worker gradients that are zero outside a few rows of 64 values (an embedding's)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(WORKERS):
        rows = torch.zeros(numel // 64, dtype=torch.bool)
        rows[torch.randperm(numel // 64, generator=g)[:max(1, int(density * numel / 64))]] = True
        out.append(torch.randn(numel, generator=g) * rows.repeat_interleave(64))
    return out


def reduce_on(name: str, grads, device: str):
    codecs = [build(name, WORKERS, rank=r) for r in range(WORKERS)]
    return reference_allreduce(codecs, [x.to(device) for x in grads], key=7)


@pytest.mark.parametrize("name", CODECS)
@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_codec_on_cuda_matches_cpu(name, kind):
    grads = sparse_grads(1) if kind == "sparse" else [torch.randn(4096) for _ in range(WORKERS)]
    truth = torch.stack(grads).mean(0)
    cpu = reduce_on(name, grads, "cpu")
    gpu = reduce_on(name, grads, "cuda")
    for out in gpu:
        assert out.device.type == "cuda" and out.dtype == grads[0].dtype and out.shape == truth.shape
        assert torch.isfinite(out).all()
        assert torch.equal(out, gpu[0]), "workers decoded the same sums differently"
    gpu0 = gpu[0].cpu()
    if name in EXACT:
        assert torch.equal(gpu0, cpu[0]), f"{name} decodes differently on CUDA"
    else:
        err_cpu = float((cpu[0] - truth).norm() / truth.norm())
        err_gpu = float((gpu0 - truth).norm() / truth.norm())
        # the same codec, other random draws: errors of the same size (never a broken decode)
        assert err_gpu <= 2 * err_cpu + 0.05, (name, err_cpu, err_gpu)
