"""``bench/bench_mininet.py``'s arguments, without root: its default codecs are ones the hosts'
agent takes (it once defaulted to a name the codec registry had dropped, and failed after
bringing the network up), and an unknown codec is refused before anything starts."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hina.mininet.workloads import CODECS

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_mininet",
                                                  ROOT / "bench" / "bench_mininet.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_default_codecs_are_the_host_agents():
    pytest.importorskip("mininet.log", reason="Mininet is not importable: apt-get install mininet")
    bench = _bench()
    seen = {}

    def run_loss(args, loss, codecs):        # stands in for the network: records the call
        seen.setdefault("codecs", codecs)
        raise SystemExit(0)

    bench.run_loss = run_loss
    with pytest.raises(SystemExit) as exc:
        bench.main(["--loss", "0"])
    assert exc.value.code == 0
    assert seen["codecs"] and set(seen["codecs"]) <= set(CODECS), seen


@pytest.mark.parametrize("codecs", ["sum,sketch", "", ",", "thc,nope"])
def test_unknown_codecs_are_refused_before_the_network_starts(codecs, capsys):
    bench = _bench()
    bench.run_loss = lambda *a: pytest.fail("the network was started")
    with pytest.raises(SystemExit) as exc:
        bench.main(["--codecs", codecs])
    assert exc.value.code == 2
    assert "choose from" in capsys.readouterr().err
