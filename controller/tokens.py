"""Per-job tokens: the credential a worker shows the job service (``hina-ctl serve``).

``hina-ctl job create`` issues the job's token (:func:`new_token`), ``hina-ctl serve``
issues one for every job of its state file that has none yet, and ``hina-ctl job token J``
prints it (or writes it to a file for the job's workers; ``--rotate`` replaces it). Workers send
it as gRPC metadata ``authorization: Bearer TOKEN``; the service compares it in constant time.

The tokens live beside the state file, in ``<state>.tokens`` (JSON, mode 0600, written by
rename under a lock file, so ``job create`` and ``serve`` in two processes lose none): the state
file itself holds nothing secret and may be shared (Mininet writes it into its log folder).

Example::

    >>> store = TokenStore(tokens_path(default_state_path()))        # doctest: +SKIP
    >>> token = store.issue(1)                                         # doctest: +SKIP
    >>> write_token_file("job1.token", token)   # for the workers     # doctest: +SKIP
"""
from __future__ import annotations

import fcntl
import json
import os
import secrets
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Optional

from .config import ConfigError

__all__ = ["TokenStore", "new_token", "tokens_path", "write_token_file", "TOKEN_BYTES",
           "TOKENS_VERSION"]

TOKENS_VERSION = 1
#: Random bytes per token (``secrets.token_urlsafe``: 43 characters of ``[A-Za-z0-9_-]``).
TOKEN_BYTES = 32
_PRIVATE = 0o600                # owner read/write only: the tokens file, its lock, token files


def tokens_path(state_path: Path) -> Path:
    """Where the tokens of the state file ``state_path`` live (``<state>.tokens``)."""
    state_path = Path(state_path)
    return state_path.with_name(state_path.name + ".tokens")


def new_token() -> str:
    """A fresh token: ``secrets.token_urlsafe(TOKEN_BYTES)`` that does not start with ``-``.

    One in 64 url-safe tokens starts with ``-``, and ``hina-worker join --token TOKEN`` (like
    any argparse option) reads such a value as an option, not as the token. Drawing again
    costs 0.02 of the 256 random bits. (A token of an older tokens file may still start
    with ``-``: ``--token=TOKEN`` or ``--token-file`` take it.)
    """
    while True:
        token = secrets.token_urlsafe(TOKEN_BYTES)
        if not token.startswith("-"):
            return token


def write_token_file(path: Path, token: str) -> None:
    """Write ``token`` (one line) to ``path``, readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _PRIVATE)
    with os.fdopen(fd, "w") as out:
        os.fchmod(fd, _PRIVATE)              # an existing file keeps its mode otherwise
        out.write(token + "\n")


class TokenStore:
    """The tokens file of one state file: ``{job id: token}``.

    Calling the store returns the tokens, re-read only when the file changed (the job service
    calls it on every request).

    Args:
        path: the tokens file (:func:`tokens_path` of the state file).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._stamp: Optional[tuple[int, int, int]] = None
        self._cached: dict[int, str] = {}
        self._cache_lock = threading.Lock()

    def __call__(self) -> dict[int, str]:
        with self._cache_lock:
            try:
                st = self.path.stat()
                stamp: Optional[tuple[int, int, int]] = (st.st_mtime_ns, st.st_size, st.st_ino)
            except FileNotFoundError:
                stamp = None
            if stamp != self._stamp:
                self._cached = self.load() if stamp else {}
                self._stamp = stamp
            return self._cached

    def load(self) -> dict[int, str]:
        """The tokens by job id (empty when the file does not exist).

        Raises:
            ConfigError: the file is unreadable or not a tokens file of this version.
        """
        try:
            data = json.loads(self.path.read_text())
            if data.get("version") != TOKENS_VERSION:
                raise ConfigError(f"tokens file {self.path}: version {data.get('version')!r}, "
                                  f"expected {TOKENS_VERSION}")
            return {int(job): str(token) for job, token in data["tokens"].items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"tokens file {self.path} is unreadable: {exc}") from None

    def _save(self, tokens: dict[int, str]) -> None:
        data = {"version": TOKENS_VERSION, "tokens": {str(j): tokens[j] for j in sorted(tokens)}}
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", dir=self.path.parent)  # 0600
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(data, out, indent=1)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @contextmanager
    def _locked(self) -> Iterator[dict[int, str]]:
        """The tokens, to change in place; saved when the block ends (under a lock file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT,
                       _PRIVATE)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            tokens = self.load()
            before = dict(tokens)
            yield tokens
            if tokens != before:
                self._save(tokens)
        finally:
            os.close(lock)                    # releases the lock

    def issue(self, job_id: int, rotate: bool = False) -> str:
        """The token of ``job_id``: a new one when it has none, or when ``rotate``."""
        with self._locked() as tokens:
            if rotate or job_id not in tokens:
                tokens[job_id] = new_token()
            return tokens[job_id]

    def ensure(self, job_ids: Iterable[int]) -> list[int]:
        """Issue a token to each job of ``job_ids`` that has none; returns those job ids."""
        with self._locked() as tokens:
            new = [j for j in job_ids if j not in tokens]
            for job_id in new:
                tokens[job_id] = new_token()
            return new

    def remove(self, job_ids: Iterable[int]) -> None:
        """Forget the tokens of ``job_ids`` (their jobs were deleted)."""
        with self._locked() as tokens:
            for job_id in job_ids:
                tokens.pop(job_id, None)
