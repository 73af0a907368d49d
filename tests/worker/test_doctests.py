"""The Example:: sections of the codec modules run."""
import doctest
import importlib

import pytest

MODULES = ["hina.hashing", "worker.codecs.base", "worker.codecs.fixedpoint", "worker.codecs.hadamard",
           "worker.codecs.packing", "worker.codecs.sketch", "worker.codecs.thc", "worker.codecs.thc_table"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
