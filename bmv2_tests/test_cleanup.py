"""BMv2 runs leave nothing behind: not after a failing test, not after a killed run.

Each case runs in a child process so that its switch and interfaces are its own (named after
its process id, :mod:`controller.bmv2_dataplane`), then looks for what is left of that process.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hina.testing.targets import bmv2_missing

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _needs_bmv2():
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)


def _nothing_left(pid: int) -> dict:
    from hina.controller.bmv2_dataplane import leftovers
    deadline = time.monotonic() + 10
    while True:
        left = leftovers(pid)
        if not any(left.values()) or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def test_a_failing_bmv2_case_leaves_no_switch_and_no_interface(tmp_path):
    case = tmp_path / "test_fails.py"
    case.write_text(textwrap.dedent("""
        import os
        import pytest
        from bmv2_tests.conftest import target, _stop_shared_bmv2   # the real fixtures
        from hina.testing.frames import install, make_job

        @pytest.fixture
        def target_kind():          # BMv2 only: the other kinds leave nothing behind to check
            return "bmv2"

        def test_fails_on_bmv2(target):
            if target.name != "bmv2":
                return
            install(target, make_job(1, 2))
            open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
            assert False, "this case fails on purpose"
    """))
    pid_file = tmp_path / "pid"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(case)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PID_FILE": str(pid_file),
                               "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout + done.stderr
    assert _nothing_left(int(pid_file.read_text())) == {"interfaces": [], "processes": [], "folders": []}


def test_leftovers_of_a_killed_run_are_swept_at_the_next_start(tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from hina.controller.bmv2_dataplane import Bmv2Dataplane
        dp = Bmv2Dataplane("bench/programs/basic.p4", ports=(1, 2))
        print("up", flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout.readline().strip() == "up"
        from hina.controller.bmv2_dataplane import leftovers, sweep_stale
        assert len(leftovers(child.pid)["interfaces"]) == 4
        child.send_signal(signal.SIGKILL)           # no finalizer runs
        child.wait(timeout=30)
        # The switch dies with its parent; the interfaces stay until a sweep.
        assert len(leftovers(child.pid)["interfaces"]) == 4
        removed = sweep_stale()
        assert len([r for r in removed if r.startswith("hv")]) == 2      # one per veth pair
        assert any(f"hina-bmv2-{child.pid}-" in r for r in removed)       # its switch's folder
        assert _nothing_left(child.pid) == {"interfaces": [], "processes": [], "folders": []}
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
