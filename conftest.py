"""Reproducible randomness for the whole suite (``tests/`` and ``bmv2_tests/``).

Every test starts with Python's, numpy's and torch's global generators seeded from its node id
and ``HINA_TEST_SEED`` (torch's own default seed differs in every process), so a test that draws
``torch.randn`` without a generator draws the same numbers in every run, alone or in the suite,
in any order. ``HINA_TEST_SEED`` is 0 unless set, or random under the ``explore`` profile; the
run's header prints it.

``HINA_HYPOTHESIS_PROFILE`` picks the property tests' profile:

* ``ci`` (the default): each property test draws the same examples on every run (the seed comes
  from the test's source), so a run of the suite, here or in CI, passes or fails on the code, not
  on the draw; no example database is read or written.
* ``explore``: fresh random examples on every run, more of them where a test does not fix its
  own count, and the example database in ``.hypothesis/`` (failures are replayed first next
  time). Run it to hunt for bugs: ``HINA_HYPOTHESIS_PROFILE=explore bash scripts/test.sh -k ...``
  (pytest's ``--hypothesis-seed N`` repeats a run's draw).

A test's own ``@settings`` (its example count, its deadline) applies under both.
"""
import os
import random
import zlib

import numpy as np
import pytest
import torch
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", max_examples=1000, print_blob=True)
PROFILE = os.environ.get("HINA_HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)
#: Mixed into every test's seed (reproduce an explore run with the seed its header printed).
TEST_SEED = int(os.environ.get("HINA_TEST_SEED")
                or (random.SystemRandom().getrandbits(32) if PROFILE == "explore" else 0))


def pytest_report_header(config):
    return (f"hypothesis profile {PROFILE}; global generators seeded by node id and "
            f"HINA_TEST_SEED={TEST_SEED}")


@pytest.fixture(autouse=True)
def _seeded_generators(request):
    """Seed the global generators from the test's node id (stable across runs and orders)."""
    seed = zlib.crc32(request.node.nodeid.encode()) ^ TEST_SEED
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
