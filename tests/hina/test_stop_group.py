"""hina.procs.stop_group (a child and its process group stopped, escalating to SIGKILL) and
hina.loopback's free ports."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from hina.loopback import free_port, free_tcp_port, free_udp_ports
from hina.procs import stop_group

#: A leader that starts a grandchild in its group, prints both pids, and (with "stubborn")
#: ignores SIGTERM; both then sleep.
_FAMILY = r"""
import os, signal, subprocess, sys, time
if "stubborn" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                          + ("signal.signal(signal.SIGTERM, signal.SIG_IGN); " if "stubborn" in sys.argv else "")
                          + "time.sleep(60)"])
print(os.getpid(), child.pid, flush=True)
time.sleep(60)
"""


def _family(*flags: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", _FAMILY, *flags], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    leader, grandchild = map(int, proc.stdout.readline().split())
    assert leader == proc.pid
    return proc, grandchild


def _kill_family(proc: subprocess.Popen, grandchild: int) -> None:
    """Whatever a failed test left of the family: SIGKILL to both, the pipe closed."""
    for pid in (proc.pid, grandchild):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(5)
    proc.stdout.close()


def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether ``pid`` has exited (a zombie counts: its parent, not us, reaps it)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_stop_group_stops_the_leader_and_its_group():
    proc, grandchild = _family()
    try:
        started = time.monotonic()
        stop_group(proc, grace=5.0)
        assert proc.returncode == -signal.SIGTERM
        assert time.monotonic() - started < 4.0, "SIGTERM was enough: no wait for the grace"
        assert _gone(grandchild), "the grandchild of the group outlived stop_group"
        stop_group(proc)                   # again: nothing to do, no error
    finally:
        _kill_family(proc, grandchild)


def test_stop_group_escalates_to_sigkill_after_the_grace():
    proc, grandchild = _family("stubborn")
    try:
        started = time.monotonic()
        stop_group(proc, grace=0.5)
        waited = time.monotonic() - started
        assert proc.returncode == -signal.SIGKILL
        assert 0.5 <= waited < 5.0, waited
        assert _gone(grandchild), "the stubborn grandchild outlived the group's SIGKILL"
    finally:
        _kill_family(proc, grandchild)


def test_stop_group_of_an_exited_process_only_reaps_it():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    while proc.poll() is None:
        time.sleep(0.01)
    stop_group(proc, signal.SIGKILL)
    assert proc.returncode == 0


@pytest.mark.parametrize("kind", [socket.SOCK_STREAM, socket.SOCK_DGRAM])
def test_free_ports_can_be_bound(kind):
    ports = [free_port(kind)] if kind == socket.SOCK_STREAM else free_udp_ports(5)
    if kind == socket.SOCK_STREAM:
        ports.append(free_tcp_port())
    assert len(set(free_udp_ports(5))) == 5
    for port in ports:
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind(("127.0.0.1", port))


#: A parent that ignores SIGINT and SIGQUIT (as a shell does for `cmd &`) and runs the command
#: in argv[1:], exiting with its status.
_IGNORING_PARENT = ("import signal, subprocess, sys; "
                    "signal.signal(signal.SIGINT, signal.SIG_IGN); "
                    "signal.signal(signal.SIGQUIT, signal.SIG_IGN); "
                    "sys.exit(subprocess.call(sys.argv[1:]))")

#: A child that prints its pid and the ignored-signal mask the kernel keeps for it, exits 7.
_SHOW_IGNORED = ("import os, sys; "
                 "mask = next(l for l in open('/proc/self/status') if l.startswith('SigIgn:')); "
                 "print(os.getpid(), int(mask.split()[1], 16)); sys.exit(7)")


def _ignored_in_child(cmd: list[str]) -> tuple[int, int]:
    """The ignored-signal mask of ``cmd`` (the child above) started by the ignoring parent."""
    done = subprocess.run([sys.executable, "-c", _IGNORING_PARENT, *cmd], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 7, done.stderr                # the child's status comes through
    return tuple(map(int, done.stdout.split()))


def test_with_default_signals_gives_back_the_signals_a_parent_ignores():
    from hina.procs import with_default_signals
    bit = lambda sig: 1 << (sig - 1)
    child = [sys.executable, "-c", _SHOW_IGNORED]
    _, inherited = _ignored_in_child(child)
    assert inherited & bit(signal.SIGINT) and inherited & bit(signal.SIGQUIT)  # the control
    _, default = _ignored_in_child(with_default_signals(child))
    assert not default & bit(signal.SIGINT) and default & bit(signal.SIGQUIT)
    _, both = _ignored_in_child(with_default_signals(child, signal.SIGINT, signal.SIGQUIT))
    assert not both & (bit(signal.SIGINT) | bit(signal.SIGQUIT))


def test_with_default_signals_execs_in_the_same_process():
    from hina.procs import with_default_signals
    proc = subprocess.Popen(with_default_signals([sys.executable, "-c", _SHOW_IGNORED]),
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 7 and int(out.split()[0]) == proc.pid
