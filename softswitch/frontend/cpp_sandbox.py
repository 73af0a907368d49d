"""Run the C preprocessor as an untrusted child process.

Every cpp run (local compiles and pushed programs alike) gets:

1. resource limits on cpp and every child (``cc1``): address space, CPU time, file size, no core
   dumps (set by ``_sandbox_exec.py`` before it execs cpp);
2. its own process group (a new session), killed with SIGKILL on every exit path, so nothing
   it started outlives the call;
3. bounded output: stdout is read as it comes and the group is killed once it passes
   ``max_output_bytes``; stderr is kept up to ``max_stderr_bytes`` (the rest is read and dropped);
4. a wall-clock timeout.

Runs for pushed programs (``sandbox_paths`` given) are also confined by Landlock when the kernel
has it: cpp and cc1 may then read and execute only ``sandbox_paths`` and the toolchain
(:func:`toolchain_paths`), and write nothing; opening ``/etc/passwd`` or ``/dev/zero`` fails in
the kernel. Where Landlock is missing, :mod:`.bundle`'s include check is the only guard.

Example::

    >>> result = run_limited(cpp_command(), b"#define X 1\\nX\\n", "<input>")
    >>> result.returncode, result.stdout[-2:]
    (0, b'1\\n')
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
from typing import Iterable, Mapping, Optional

from ..api import P4CompileError

log = logging.getLogger("softswitch.cpp")

MIB = 1 << 20
SANDBOX_EXEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sandbox_exec.py")
SETUP_FAILED = 126               # _sandbox_exec.py's exit status when it could not set limits
PARENT_ENV = "SOFTSWITCH_CPP_PARENT"   # set to the switch's pid in cpp's environment (ps, tests)
READ_CHUNK = 1 << 16
WAIT_POLL_S = 0.002              # how often the exit of a child that closed its pipes is polled
# Where cpp, cc1, the dynamic loader and the shared libraries live (read + execute only).
TOOLCHAIN_DIRS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/libexec")
TOOLCHAIN_FILES = ("/etc/ld.so.cache",)
LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
SYS_LANDLOCK_CREATE_RULESET = 444


@dataclasses.dataclass(frozen=True)
class CppLimits:
    """Limits for one preprocessor run (cpp and every process it starts).

    The defaults leave a wide margin over ``p4/hina.p4`` at 256 words (455 KiB of output,
    under 128 MiB of address space, 0.05 s), stop ``#include "/dev/zero"`` in 0.2 s and a macro
    or include bomb in a few seconds (cpp writes a few MiB/s of such output).
    """
    max_output_bytes: int = 8 * MIB    # preprocessed text; the front end needs ~20 s per MiB
    max_memory_bytes: int = 256 * MIB  # RLIMIT_AS of cpp and of cc1
    max_cpu_s: int = 10                # RLIMIT_CPU of each process
    timeout_s: float = 20.0            # wall clock for the whole run
    max_stderr_bytes: int = 64 * 1024  # diagnostics kept (only the first error is reported)

    def __post_init__(self):
        for name in ("max_output_bytes", "max_memory_bytes", "max_cpu_s", "timeout_s",
                     "max_stderr_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"CppLimits.{name} must be positive, got {getattr(self, name)!r}")


DEFAULT_LIMITS = CppLimits()


class CppLimitError(P4CompileError):
    """The preprocessor hit a limit of :class:`CppLimits` (``limit`` names which)."""

    def __init__(self, limit: str, message: str, file: str):
        super().__init__(message, file, 0, 0)
        self.limit = limit


@dataclasses.dataclass(frozen=True)
class CppResult:
    returncode: int
    stdout: bytes
    stderr: bytes


@functools.lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 where Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(abi), 0)


@functools.lru_cache(maxsize=4)
def toolchain_paths(cpp: str) -> tuple:
    """The files and directories cpp needs to run: itself, cc1's directory, the libraries."""
    paths = {os.path.realpath(cpp)}
    try:
        cc1 = subprocess.run([cpp, "-print-prog-name=cc1"], capture_output=True, text=True,
                             timeout=DEFAULT_LIMITS.timeout_s, env=clean_env()).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        cc1 = ""
    if os.path.isabs(cc1):
        paths.add(os.path.dirname(os.path.realpath(cc1)))
    paths.update(p for p in TOOLCHAIN_DIRS + TOOLCHAIN_FILES if os.path.exists(p))
    return tuple(sorted(paths))


def clean_env() -> dict:
    """An environment for cpp without the variables that add include directories (``CPATH``)
    or make it write files (``DEPENDENCIES_OUTPUT``)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}


def run_limited(cmd: list, data: bytes, filename: str, *, limits: CppLimits = DEFAULT_LIMITS,
                cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                sandbox_paths: Optional[Iterable[str]] = None) -> CppResult:
    """Run ``cmd`` (a cpp command line) on ``data`` under ``limits``.

    Args:
        cmd: the command; ``cmd[0]`` is an absolute path.
        data: its standard input.
        filename: the file errors are located in.
        limits: see :class:`CppLimits`.
        cwd, env: as for ``subprocess.Popen``; ``SOFTSWITCH_CPP_PARENT`` is added to ``env``
            (this process's id), so that every process of the run can be found.
        sandbox_paths: confine the run with Landlock (where the kernel has it) to reading these
            paths and the toolchain; ``None`` runs unconfined (local compiles).

    Returns:
        the exit status and output; the process group is gone when this returns.

    Raises:
        CppLimitError: output, time, memory or CPU limit reached (the group is killed).
        P4CompileError: the limits or the sandbox could not be set up.
    """
    spec = {"rlimits": {"AS": limits.max_memory_bytes, "CPU": limits.max_cpu_s,
                        "FSIZE": limits.max_output_bytes, "CORE": 0},
            "landlock": None}
    if sandbox_paths is not None:
        abi = landlock_abi()
        if abi:
            paths = sorted({*sandbox_paths, *toolchain_paths(cmd[0])})
            spec["landlock"] = {"abi": abi, "paths": paths}
        else:
            _warn_no_landlock()
    argv = [sys.executable, "-I", "-S", SANDBOX_EXEC, json.dumps(spec), "--", *cmd]
    env = dict(os.environ if env is None else env)
    env[PARENT_ENV] = str(os.getpid())
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
    except OSError as exc:
        raise P4CompileError(f"cannot start the C preprocessor: {exc.strerror}", filename,
                             0, 0) from None
    try:
        stdout, stderr = _collect(proc, data, limits, filename)
    finally:
        _kill_group(proc)
    if proc.returncode == SETUP_FAILED and stderr.startswith(b"sandbox setup failed"):
        log.error("%s", stderr.decode("utf-8", "replace").strip())
        raise P4CompileError("the preprocessor's limits or sandbox could not be set up "
                             "(see the switch log)", filename, 0, 0)
    result = CppResult(proc.returncode, stdout, stderr)
    problem = limit_problem(result, limits)
    if problem:
        raise CppLimitError(problem[0], problem[1], filename)
    return result


def limit_problem(result: CppResult, limits: CppLimits = DEFAULT_LIMITS) -> Optional[tuple]:
    """``(limit, message)`` when a failed run hit a memory or CPU limit, else None."""
    if result.returncode == 0:
        return None
    err = result.stderr
    if b"out of memory" in err or b"memory exhausted" in err or b"Cannot allocate memory" in err:
        return ("memory", f"the preprocessor ran out of its {limits.max_memory_bytes // MIB} MiB "
                          "memory limit (a huge or endless included file, or a macro bomb)")
    if b"CPU time limit" in err or result.returncode == -signal.SIGXCPU:
        return ("cpu", f"the preprocessor used up its {limits.max_cpu_s} s CPU time limit")
    if b"Killed signal" in err or result.returncode == -signal.SIGKILL:
        return ("killed", "the preprocessor was killed (out of memory or CPU time)")
    return None


def _collect(proc: subprocess.Popen, data: bytes, limits: CppLimits, filename: str) -> tuple:
    """Feed stdin, read stdout and stderr within the limits, wait for the exit (not reaped)."""
    deadline = time.monotonic() + limits.timeout_s
    out, err = bytearray(), bytearray()
    view, written = memoryview(data), 0
    with selectors.DefaultSelector() as sel:
        for pipe, event in ((proc.stdin, selectors.EVENT_WRITE),
                            (proc.stdout, selectors.EVENT_READ),
                            (proc.stderr, selectors.EVENT_READ)):
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe, event)
        if not data:
            sel.unregister(proc.stdin)
            proc.stdin.close()
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timeout(limits, filename)
            for key, _ in sel.select(remaining):
                pipe = key.fileobj
                if pipe is proc.stdin:
                    try:
                        written += os.write(pipe.fileno(), view[written:written + READ_CHUNK])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:     # cpp stopped reading: its status says why
                        written = len(data)
                    if written >= len(data):
                        sel.unregister(pipe)
                        pipe.close()
                    continue
                chunk = os.read(pipe.fileno(), READ_CHUNK)
                if not chunk:
                    sel.unregister(pipe)
                    continue
                if pipe is proc.stdout:
                    out += chunk
                    if len(out) > limits.max_output_bytes:
                        raise CppLimitError(
                            "output", "the preprocessor's output exceeds its "
                            f"{limits.max_output_bytes // MIB} MiB limit (an include or macro "
                            "bomb?)", filename)
                else:
                    err += chunk[:max(0, limits.max_stderr_bytes - len(err))]
    while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() > deadline:
            raise _timeout(limits, filename)
        time.sleep(WAIT_POLL_S)
    return bytes(out), bytes(err)


def _timeout(limits: CppLimits, filename: str) -> CppLimitError:
    return CppLimitError("time", f"the preprocessor timed out after {limits.timeout_s:g} s",
                         filename)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill cpp's process group, then reap cpp. The group is killed while cpp is not yet reaped,
    so its id cannot have been reused by another process."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None and not pipe.closed:
            try:
                pipe.close()
            except OSError:
                pass
    proc.wait()


@functools.lru_cache(maxsize=1)
def _warn_no_landlock() -> None:
    log.warning("Landlock is not available in this kernel: pushed P4 programs are confined by "
                "the include check and the resource limits only")
