"""The sketch hash: torch and numpy twins match zlib, and the P4 reference vectors hold."""
import json
import math
import struct
import zlib

import pytest
import torch

from hina.hashing import (VECTORS_PATH, bucket_of, generate_vectors, sign_of, sketch_hash_numpy,
                          sketch_hash_scalar, sketch_hash_torch)

U32 = 1 << 32


def test_vector_file_matches_zlib_and_generator():
    data = json.loads(VECTORS_PATH.read_text())
    assert data == json.loads(json.dumps(generate_vectors()))  # regenerate with python -m hina.hashing --write
    for v in data["vectors"]:
        h1 = zlib.crc32(struct.pack(">II", v["seed_r"], (v["index"] + v["row_offset"]) % U32))
        h = zlib.crc32(struct.pack(">II", v["seed_r"], (h1 + v["row_offset"]) % U32))
        assert v["h1"] == h1
        assert v["h"] == h == sketch_hash_scalar(v["seed"], v["row"], v["index"])
        assert v["sign"] == (1 if h >> 31 == 0 else -1)
        for c, b in v["bucket"].items():
            assert b == h % int(c) == bucket_of(h, int(c))


@pytest.mark.parametrize("seed,row", [(0, 0), (1, 2), (0xFFFFFFFF, 3), (0x12345678, 4)])
def test_vectorized_twins_match_scalar(seed, row):
    gen = torch.Generator().manual_seed(seed % 1000 + row)
    idx = torch.cat([torch.tensor([0, 1, U32 - 1]), torch.randint(0, U32, (300,), generator=gen)])
    ref = [sketch_hash_scalar(seed, row, int(i)) for i in idx]
    assert sketch_hash_torch(seed, row, idx).tolist() == ref
    assert sketch_hash_numpy(seed, row, idx.numpy()).tolist() == ref
    assert sketch_hash_torch(seed, row, idx).dtype == torch.int64


def test_sign_and_bucket_helpers():
    assert sign_of(0x7FFFFFFF) == 1 and sign_of(0x80000000) == -1
    with pytest.raises(ValueError, match="power of two"):
        bucket_of(5, 3)
    with pytest.raises(ValueError, match="unsigned 32-bit"):
        sketch_hash_scalar(0, 0, U32)
    with pytest.raises(ValueError, match="integer dtype"):
        sketch_hash_torch(0, 0, torch.zeros(3))


def test_plain_crc_rows_would_be_dependent():
    """Why the hash is not plain crc32(seed_r ++ i): rows would be one hash up to an xor."""
    def plain(seed_r, i):
        return zlib.crc32(struct.pack(">II", seed_r, i))
    idx = range(200)
    xors = {plain(5, i) ^ plain(6, i) for i in idx}
    assert len(xors) == 1  # CRC is affine: rows differ by a constant
    n, c = 4096, 64
    idx = torch.arange(n)
    h0, h1 = sketch_hash_torch(5, 0, idx), sketch_hash_torch(5, 1, idx)
    agree = (sign_of(h0) == sign_of(h1)).double().mean().item()
    assert abs(agree - 0.5) <= 6 * math.sqrt(0.25 / n)  # independent signs: binomial bound
    joint = torch.unique(bucket_of(h0, c) * c + bucket_of(h1, c)).numel()
    expected = c * c * (1 - math.exp(-n / (c * c)))  # occupied cells of c*c under random hashing
    assert joint >= expected - 6 * math.sqrt(expected)
