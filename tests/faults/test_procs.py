"""The event stream of the fault suite's child processes (controller.faultsuite_procs)."""
from __future__ import annotations

import sys

from hina.controller.faultsuite_procs import Child

# two threads emit at once, as a worker's main thread and its seat watcher do
_TWO_THREADS = """
import threading
from hina.controller.faultsuite_procs import _emit
def run(name):
    for i in range(20000):
        _emit(name, i=i)
threads = [threading.Thread(target=run, args=(n,)) for n in ("main", "watch")]
for t in threads: t.start()
for t in threads: t.join()
"""


def test_events_of_two_threads_all_arrive(tmp_path):
    """Every event two threads emit concurrently reaches the harness whole. With ``print``
    (text and newline written apart) lines merged with the other thread's and both events were
    lost (this test failed so): a worker's ``seated`` went missing that way and failed the
    kill -9 serve row in CI."""
    child = Child("emitter", [sys.executable, "-c", _TWO_THREADS], tmp_path)
    try:
        assert child.wait_event(lambda e: False, timeout=120) is None     # returns at eof
        assert child.proc.wait(timeout=30) == 0, child.log_path.read_text()
    finally:
        child.stop()
    assert child.of("text") == []
    for name in ("main", "watch"):
        assert [e["i"] for e in child.of(name)] == list(range(20000))
