"""The Example:: sections of the codec modules run."""
import doctest
import importlib

import pytest

MODULES = ["hina.hashing", "hina.worker.codecs.base", "hina.worker.codecs.fixedpoint", "hina.worker.codecs.hadamard",
           "hina.worker.codecs.packing", "hina.worker.codecs.registry", "hina.worker.codecs.sketch", "hina.worker.codecs.lossless",
           "hina.worker.codecs.sketched_sgd", "hina.worker.codecs.adaptive", "hina.worker.codecs.thc", "hina.worker.codecs.thc_table",
           "hina.worker.codecs.sparse_thc"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
