"""What ``hina-ctl serve`` does on the switch so that restarts need no manual step.

* :class:`SwitchKeeper.bump` is the job service's ``generation_bumper``: a seat taken again in
  the job's current generation (its worker restarted, or the whole job runs again) moves the job
  to its next generation on the switch (:meth:`controller.jobs.JobManager.bump_generation`, all
  or nothing) and in the state file, with the cause, before the Join is answered.
* :meth:`SwitchKeeper.attach` runs whenever :class:`controller.primary.PrimaryHold` (re)takes the
  primary role: a switch without a pipeline (it restarted) gets the state file's pipeline and
  every job again (what ``hina-ctl resync`` does), each in its next generation.

Both write through the primary connection PrimaryHold keeps, one at a time (a lock), and re-read
the state file first, so a ``hina-ctl job create`` written meanwhile is kept.

Example::

    >>> keeper = SwitchKeeper(state_path, thrift_port=None)              # doctest: +SKIP
    >>> hold = PrimaryHold(connect, on_primary=keeper.attach)            # doctest: +SKIP
    >>> serve(jobs, address, tokens=tokens, generation_bumper=keeper.bump)  # doctest: +SKIP
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Optional

from hina import protocol as P

from .jobs import JobError, JobManager
from .p4runtime_client import SwitchConnection
from .state import ControllerState
from .target import register_access

__all__ = ["SwitchKeeper"]

log = logging.getLogger("hina.controller.restarts")


class SwitchKeeper:
    """Bumps generations and re-pushes a restarted switch for ``hina-ctl serve``.

    Args:
        state_path: the controller's state file.
        thrift_port: BMv2's Thrift port (register writes; ``None``: the default).
    """

    def __init__(self, state_path: Path, thrift_port: Optional[int] = None):
        self.state_path, self.thrift_port = Path(state_path), thrift_port
        self._lock = threading.Lock()
        self._conn: Optional[SwitchConnection] = None
        self.resyncs = 0            # times a restarted switch got pipeline and jobs again

    def _manager(self, conn: SwitchConnection, state: ControllerState):
        target = state.pipeline.target if state.pipeline is not None else "embedded"
        registers = register_access(target, conn, self.thrift_port, used=state.used)
        return JobManager(conn, registers=registers, target=target), registers

    def attach(self, conn: SwitchConnection) -> None:
        """Use ``conn`` (just made primary) from now on; re-push pipeline and jobs when the
        switch has no pipeline (it restarted). Errors are logged, not raised."""
        with self._lock:
            self._conn = conn
            try:
                self._ensure_pipeline(conn)
            except Exception as exc:     # keep serving: a later re-take tries again
                log.error("%s: cannot re-install pipeline and jobs: %s", conn.address, exc)

    def _ensure_pipeline(self, conn: SwitchConnection) -> None:
        state = ControllerState.load(self.state_path)
        if state.pipeline is None or conn.fetch_pipeline() is not None:
            return
        log.warning("%s has no pipeline (the switch restarted): re-pushing the pipeline and "
                    "jobs %s of %s", conn.address, sorted(state.jobs) or "none", self.state_path)
        conn.set_pipeline(*state.pipeline.build())
        state.used = []                  # a pushed pipeline starts with zeroed registers
        jobs, registers = self._manager(conn, state)
        # Each job comes back in its next generation: the switch lost its slots, and a result it
        # was multicasting may have reached some workers and not others. Those others' packets
        # then meet a NOTICE at once (not a slot nobody else will fill again, until their
        # give-up time), and the first call of the new generation checks that every worker is
        # at the same call (worker.transport.Transport.begin_call).
        cause = "the switch restarted (its slots were lost); re-installed by hina-ctl serve"
        moved = [state.jobs[j].replace(generation=P.next_generation(state.jobs[j].generation),
                                       generation_cause=cause) for j in sorted(state.jobs)]
        try:
            done = jobs.resync(moved)
        finally:
            registers.close()
        latest = ControllerState.load(self.state_path)     # what others wrote meanwhile
        for config in done:
            if config.job_id in latest.jobs:
                latest.jobs[config.job_id] = latest.jobs[config.job_id].replace(
                    generation=config.generation, generation_cause=cause)
        if state.pipeline.target == "tofino":    # the cells of the re-installed jobs
            latest.used = jobs.register_cells([c.job_id for c in done])
        latest.save(self.state_path)
        self.resyncs += 1
        log.warning("%s: pipeline re-pushed; %d job(s) re-installed in new generations (%s)",
                    conn.address, len(done),
                    ", ".join(f"job {c.job_id}: {c.generation}" for c in done) or "none")

    def bump(self, job_id: int, cause: str) -> int:
        """Move ``job_id`` to its next generation on the switch and in the state file; returns it.

        Raises:
            JobError: no primary connection now, the job is not in the state file, or the switch
                refused (nothing changed then).
        """
        with self._lock:
            conn = self._conn
            if conn is None or not conn.is_primary:
                raise JobError("not primary on the switch now (is it restarting?)")
            state = ControllerState.load(self.state_path)
            config = state.jobs.get(job_id)
            if config is None:
                raise JobError(f"job {job_id} is not in {self.state_path}")
            jobs, registers = self._manager(conn, state)
            try:
                jobs.adopt(config)
                generation = jobs.bump_generation(job_id)
            finally:
                registers.close()
            state = ControllerState.load(self.state_path)     # what others wrote meanwhile
            state.jobs[job_id] = jobs.record(job_id).config.replace(generation_cause=cause)
            state.save(self.state_path)
            return generation
