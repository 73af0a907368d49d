"""Child processes: commands that die with the thread that started them, started without a
``preexec_fn`` (:func:`with_parent_death_signal`); commands that get the default action of
signals their parent ignores (:func:`with_default_signals`, e.g. Ctrl-C for a child of a suite
run under ``nohup``); stopping one with its process group
(:func:`stop_group`); and Python ranks forked from a server that has imported torch once
(:func:`rank_processes`).

A ``preexec_fn`` makes ``subprocess.Popen`` use fork() instead of vfork(), and in a process where
gRPC runs (the controller, the job service, a worker's job client) gRPC's fork handlers then
kill about 1 child in 100 before it reaches exec (grpcio 1.85: SIGABRT, or "Epoll1Poller ...
epoll_wait error: Bad file descriptor"; grpc/grpc#43055; measured in a process with a gRPC server
and client: 3 of 300 children started with a ``preexec_fn`` died before exec, 0 of 300 this way).
:func:`with_parent_death_signal` asks for the death signal in a short Python prologue that then
execs the command, so Popen keeps using vfork().

Example::

    >>> import subprocess
    >>> subprocess.call(with_parent_death_signal(["true"]), start_new_session=True)
    0
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from typing import Sequence

__all__ = ["with_parent_death_signal", "with_default_signals", "signal_group", "stop_group",
           "rank_processes"]

#: What :func:`with_parent_death_signal` runs before the command: PR_SET_PDEATHSIG (it survives
#: exec; prctl option 1), give up if the parent is already gone, exec.
_PDEATHSIG_EXEC = ("import ctypes, os, signal, sys; "
                   "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL); "
                   "os.getppid() == int(sys.argv[1]) or os._exit(1); "
                   "os.execvp(sys.argv[2], sys.argv[2:])")


def with_parent_death_signal(cmd: Sequence[str]) -> list[str]:
    """``cmd`` behind a short Python prologue that asks for SIGKILL when the thread that starts
    it ends (Linux ``PR_SET_PDEATHSIG``, kept across exec) and then execs ``cmd`` in the same
    process (same pid, same exit status). Use with ``start_new_session=True`` where the child
    must not get the terminal's signals."""
    return [sys.executable, "-c", _PDEATHSIG_EXEC, str(os.getpid()), *cmd]


#: What :func:`with_default_signals` runs before the command: the default action for each
#: signal number in ``sys.argv[1]`` (comma-separated), then exec.
_DEFAULT_SIGNALS_EXEC = ("import os, signal, sys; "
                         "[signal.signal(int(n), signal.SIG_DFL) for n in sys.argv[1].split(',')]; "
                         "os.execvp(sys.argv[2], sys.argv[2:])")


def with_default_signals(cmd: Sequence[str], *signals: int) -> list[str]:
    """``cmd`` behind a short Python prologue that sets ``signals`` (default: SIGINT) back to
    their default action and then execs ``cmd`` in the same process. An ignored signal stays
    ignored across fork and exec: a command started from a process run under ``nohup`` or
    ``&`` ignores SIGINT, and this gives it Ctrl-C again without a ``preexec_fn`` (see above:
    in a process where gRPC runs, a ``preexec_fn`` kills about 1 child in 100)."""
    numbers = ",".join(str(int(s)) for s in (signals or (signal.SIGINT,)))
    return [sys.executable, "-c", _DEFAULT_SIGNALS_EXEC, numbers, *cmd]


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """``sig`` to the process group ``proc`` leads (started with ``start_new_session=True``);
    nothing when the group is gone already."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def stop_group(proc: subprocess.Popen, first: int = signal.SIGTERM, grace: float = 10.0) -> None:
    """Stop ``proc`` and the process group it leads: ``first`` (SIGTERM, or e.g. SIGKILL for a
    crash) to the group, SIGKILL when ``proc`` still runs ``grace`` seconds later, and reap it.
    A process that has exited is only reaped; calling again does nothing.

    Raises:
        subprocess.TimeoutExpired: ``proc`` outlived SIGKILL by ``max(grace, 10)`` seconds (a
            process stuck in the kernel).
    """
    if proc.poll() is not None:
        return
    signal_group(proc, first)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        signal_group(proc, signal.SIGKILL)
        proc.wait(timeout=max(grace, 10.0))


def rank_processes(*preload: str) -> multiprocessing.context.BaseContext:
    """The multiprocessing context to start training ranks from: a fork server that has imported
    torch (and the modules named in ``preload``) once, so that each rank starts by forking it
    instead of importing torch again (``import torch`` costs seconds of CPU, and a demo starts a
    rank per worker for every mode it compares).

    The server only imports: it never initialises CUDA nor runs torch's thread pools (the
    reasons PyTorch asks for spawn or forkserver rather than fork), and it is started by exec,
    not fork, so no gRPC state of this process reaches the ranks (see above). The preload list
    counts when the server starts, at the first start of a process from this context in this
    process; later calls reuse that server. It lives until this process exits.
    """
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", *preload])
    return ctx
