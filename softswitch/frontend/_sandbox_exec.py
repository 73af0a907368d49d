"""Child side of :mod:`softswitch.frontend.cpp_sandbox`: set limits, then exec the preprocessor.

Run as ``python -I -S _sandbox_exec.py SPEC -- PROGRAM ARGS...`` (standard library only, so it
starts fast and imports nothing from the project). ``SPEC`` is JSON::

    {"rlimits": {"AS": bytes, "CPU": seconds, "FSIZE": bytes, "CORE": 0},
     "landlock": {"abi": 3, "paths": ["/allowed/dir", "/allowed/file", ...]}}   # or null

Steps:

1. Set each resource limit (soft = hard, so the program cannot raise it again).
2. With ``landlock``: forbid gaining privileges, then restrict the file system to reading and
   executing ``paths`` (directories and everything beneath them, or single files); every write,
   and every read elsewhere, is refused by the kernel. The restriction is inherited by every
   child (``cc1``).
3. ``execv`` the program. Any failure before exec exits with status 126 and one line on stderr.
"""
import ctypes
import json
import os
import resource
import sys

SETUP_FAILED = 126

# Landlock (linux/landlock.h): syscall numbers are the same on every architecture.
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
ACCESS_EXECUTE, ACCESS_READ_FILE, ACCESS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
HANDLED_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
READ_EXEC_FILE = ACCESS_EXECUTE | ACCESS_READ_FILE
READ_EXEC_DIR = READ_EXEC_FILE | ACCESS_READ_DIR


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _handled_access(abi: int) -> int:
    return HANDLED_BY_ABI[max(k for k in HANDLED_BY_ABI if k <= abi)]


def restrict_file_system(abi: int, paths) -> None:
    """Allow only reading and executing ``paths`` from now on (this process and its children)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    handled = _handled_access(abi)
    attr = _RulesetAttr(handled)
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr),
                           ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    for path in paths:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            allowed = READ_EXEC_DIR if os.path.isdir(path) else READ_EXEC_FILE
            rule = _PathBeneathAttr(allowed & handled, fd)
            if libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                            ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
        finally:
            os.close(fd)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(ruleset)


def main(argv) -> None:
    try:
        spec, sep, command = json.loads(argv[1]), argv[2], argv[3:]
        if sep != "--" or not command:
            raise ValueError("usage: _sandbox_exec.py SPEC -- PROGRAM ARGS...")
        for name, value in spec.get("rlimits", {}).items():
            limit = getattr(resource, f"RLIMIT_{name}")
            resource.setrlimit(limit, (value, value))
        landlock = spec.get("landlock")
        if landlock:
            restrict_file_system(landlock["abi"], landlock["paths"])
        os.execv(command[0], command)
    except Exception as exc:    # report, never run the program unconfined
        sys.stderr.write(f"sandbox setup failed: {exc}\n")
        sys.stderr.flush()
        os._exit(SETUP_FAILED)


if __name__ == "__main__":
    main(sys.argv)
