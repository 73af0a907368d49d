"""Hypothesis profiles for the whole suite (``tests/`` and ``bmv2_tests/``).

``HINA_HYPOTHESIS_PROFILE`` picks one (or pytest's ``--hypothesis-profile``):

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

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", max_examples=1000, print_blob=True)
settings.load_profile(os.environ.get("HINA_HYPOTHESIS_PROFILE", "ci"))
