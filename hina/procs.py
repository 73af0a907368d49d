"""Child processes: commands that die with the thread that started them, started without a
``preexec_fn`` (:func:`with_parent_death_signal`); and Python ranks forked from a server that
has imported torch once (:func:`rank_processes`).

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
import sys
from typing import Sequence

__all__ = ["with_parent_death_signal", "rank_processes"]

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
