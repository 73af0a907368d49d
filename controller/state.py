"""The controller's state file: the switch, the pushed pipeline and the installed jobs.

Switch state does not survive a switch restart; this file does. ``hina-ctl resync`` re-pushes the
pipeline and re-creates every job from it. The file is JSON, written atomically (temporary file
and rename) so a crash never leaves half a file; the job service re-reads it when it changes.

The file also keeps, per job, who holds its seats in the job's current generation
(:class:`SeatRecord`: each seat's holder is a worker *incarnation*, the random nonce a worker
process sends with Join), so that a restarted ``hina-ctl serve`` can tell the same worker
joining again (no new generation) from a new process taking the seat (a new generation):
docs/reliability.md, "Restarts". Only the job service writes seat records
(:meth:`ControllerState.save_seats`); every other writer keeps the file's records as they are
(:meth:`ControllerState.save` re-reads them under the file's lock), so a ``hina-ctl`` command
that loaded the file before a Join cannot lose that Join's record. Writers take an exclusive
``flock`` on ``FILE.lock`` around their read-modify-write.

Location: ``--state FILE``, else ``$HINA_CTL_STATE``, else ``~/.local/state/hina/ctl.json``.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from .config import ConfigError, JobConfig
from .target import PipelineConfig

__all__ = ["ControllerState", "SeatHolder", "SeatRecord", "default_state_path", "STATE_VERSION"]

STATE_VERSION = 1
STATE_ENV = "HINA_CTL_STATE"


def default_state_path() -> Path:
    env = os.environ.get(STATE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hina" / "ctl.json"


@dataclass(frozen=True)
class SeatHolder:
    """Who took a seat of a job in the job's current generation.

    Attributes:
        incarnation: the worker process's nonce (``JoinRequest.incarnation``); "" for a client
            that sends none (older ``hina-worker``): such a holder is never the same worker again.
        name: the worker's free-text name (host:pid), for logs and the cause of a bump.
        freed: why the seat was freed since ("left", "timed out ..."); "" while it is held.
        left: the holder gave the seat back (Leave): its next Join is a new start.
        barriers: how many times each named barrier released this holder (a worker that takes
            the seat of a running job passes at once a barrier every other worker passed).
    """
    incarnation: str
    name: str
    freed: str = ""
    left: bool = False
    barriers: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"incarnation": self.incarnation, "name": self.name, "freed": self.freed,
                "left": self.left, "barriers": dict(self.barriers)}

    @classmethod
    def from_json(cls, data: dict) -> "SeatHolder":
        return cls(str(data["incarnation"]), str(data["name"]), str(data.get("freed", "")),
                   bool(data.get("left", False)),
                   {str(k): int(v) for k, v in data.get("barriers", {}).items()})


@dataclass(frozen=True)
class SeatRecord:
    """The seats of one job taken in ``generation`` (worker index -> holder)."""
    generation: int
    holders: dict[int, SeatHolder] = field(default_factory=dict)

    def to_json(self, job_id: int) -> dict:
        return {"job_id": job_id, "generation": self.generation,
                "holders": [dict(index=i, **self.holders[i].to_json())
                            for i in sorted(self.holders)]}

    @classmethod
    def from_json(cls, data: dict) -> "SeatRecord":
        return cls(int(data["generation"]),
                   {int(h["index"]): SeatHolder.from_json(h) for h in data.get("holders", [])})


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``PATH.lock`` (beside the state file); never nest it."""
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)         # releases the lock


def _read_seats(path: Path, data: dict) -> dict[int, SeatRecord]:
    try:
        return {int(r["job_id"]): SeatRecord.from_json(r) for r in data.get("seats", [])}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"state file {path}: unreadable seat records: {exc}") from None


@dataclass
class ControllerState:
    """Everything the controller must remember across runs and switch restarts.

    ``seats`` is what the file held when it was loaded; :meth:`save` does not write it (it keeps
    the file's current records), :meth:`save_seats` does.
    """
    pipeline: Optional[PipelineConfig] = None
    jobs: dict[int, JobConfig] = field(default_factory=dict)
    seats: dict[int, SeatRecord] = field(default_factory=dict)
    #: tofino: ``(register, first, count)`` cells jobs were given since the pipeline was pushed
    #: (where the P4Info's registers are Tofino externs, hina-ctl cannot zero them: a job may
    #: only take cells no job has held since the push; :class:`controller.tofino.TofinoRegisters`)
    used: list[tuple[str, int, int]] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> "ControllerState":
        """The state in ``path`` (empty when the file does not exist).

        Raises:
            ConfigError: the file is unreadable or not a state file of this version.
        """
        path = Path(path)
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text())
            if data.get("version") != STATE_VERSION:
                raise ConfigError(f"state file {path}: version {data.get('version')!r}, "
                                  f"expected {STATE_VERSION}")
            pipeline = data.get("pipeline")
            return cls(PipelineConfig.from_json(pipeline) if pipeline else None,
                       {int(j["job_id"]): JobConfig.from_json(j) for j in data.get("jobs", [])},
                       _read_seats(path, data),
                       [(str(r), int(f), int(c)) for r, f, c in data.get("used", [])])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"state file {path} is unreadable: {exc}") from None

    def save(self, path: Path) -> None:
        """Write pipeline and jobs; the seat records stay as the file has them now (those of
        jobs that no longer exist are dropped)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            try:
                seats = ControllerState.load(path).seats
            except ConfigError:          # an unreadable file is replaced whole
                seats = self.seats
            self._write(path, seats)

    @classmethod
    def save_seats(cls, path: Path, job_id: int, record: SeatRecord) -> None:
        """Replace job ``job_id``'s seat record in the file (the rest as the file has it).

        Raises:
            ConfigError: the file is unreadable or does not hold the job.
        """
        path = Path(path)
        with _locked(path):
            state = cls.load(path)
            if job_id not in state.jobs:
                raise ConfigError(f"state file {path}: job {job_id} is not installed")
            state.seats[job_id] = record
            state._write(path, state.seats)

    def _write(self, path: Path, seats: dict[int, SeatRecord]) -> None:
        data = {"version": STATE_VERSION,
                "pipeline": self.pipeline.to_json() if self.pipeline else None,
                "jobs": [self.jobs[j].to_json() for j in sorted(self.jobs)],
                "seats": [seats[j].to_json(j) for j in sorted(seats) if j in self.jobs]}
        if self.used:
            data["used"] = [list(r) for r in self.used]
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(data, out, indent=1)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
