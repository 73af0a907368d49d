"""Kill -9 rows of the fault suite: a worker, the switch, ``hina-ctl serve`` (docs/reliability.md).

Every row runs a real deployment of separate processes: the switch (the embedded target,
``python -m hina.softswitch`` on loopback UDP tunnel ports, or ``simple_switch_grpc`` on veth pairs),
``hina-ctl serve`` (the job service, primary on the switch, re-installs a restarted switch), and
worker processes that join the job with its token and all-reduce int32 vectors step after step,
following the job's generation, each checking its own result bit for bit and reporting every
step (exact, wrong, failed) as a JSON line (:mod:`controller.faultsuite_procs`). Then one of the
processes gets SIGKILL, several times per row, at seeded moments:

* :func:`row_kill_worker`: a worker mid-allreduce. All kills but the last, a standby worker
  process (started beforehand, imports done) joins once the dead seat's lease ran out, which
  moves the job to a new generation; the survivors, stuck in the step, get a NOTICE, follow and
  retry the step with it. The last kill is not replaced: the survivors must fail
  (``TransportTimeout``) within ``give_up_s``.
* :func:`row_kill_switch`: the switch mid-job, started again at once on the same ports;
  ``serve``'s primary hold re-takes the role and re-pushes pipeline and job, in the job's next
  generation; the workers get a NOTICE, follow, check that they all are at the same step
  (``Transport.begin_call``) and retry it. Embedded target and BMv2. A kill that lands between
  the copies of a result's multicast leaves some workers with the result (they went on to the
  next step) and the others without it; the stored result died with the switch, so the check
  finds them at different steps: the ones behind fail their step at once (``CallMismatch``,
  never a wrong sum) and go on to the next, where the others wait for them. The row tells
  these kills apart (:data:`SWITCH_PATHS`); both recover within the same bound.
* :func:`row_kill_serve`: ``hina-ctl serve`` mid-job, started again on the same address after a
  while; the workers go on aggregating through the switch meanwhile and re-seat themselves with
  the new service (same index, no new generation).

What must hold in each: no wrong sum, ever, and the recovery within the stated bound (each row's
``must_hold``). Times are measured with the monotonic clock the processes share.

Example::

    >>> from controller import faultsuite_kills as K                   # doctest: +SKIP
    >>> print(K.row_kill_serve(kills=2).held)                          # doctest: +SKIP
"""
from __future__ import annotations

import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from hina import programs

from .faultsuite import Row, bmv2_missing, skipped, target_label
from .faultsuite_procs import (ELEMENTS, N_WORKERS, Bmv2SwitchProcess, Child,
                               Deployment, EmbeddedSwitchProcess)

__all__ = ["row_kill_worker", "row_kill_switch", "row_kill_serve", "kill_rows", "KILL_COUNTS",
           "SWITCH_PATHS", "bmv2_missing"]

#: Seconds a worker's seat outlives its last request (``serve --lease``).
LEASE_S = 1.0
#: Bound of the worker row: from the replacement's Join to every worker's result of the step
#: the kill interrupted (the survivors in the new generation): docs/reliability.md "Restarts"
#: (within 2 s of the Join).
WORKER_RECOVERY_S = 2.0
#: give_up_s of the workers of the worker row: survivors of an unreplaced kill fail after it.
WORKER_GIVE_UP_S = 8.0
#: ... and must have failed this long after the kill (their last result came before the kill).
WORKER_FAIL_BOUND_S = WORKER_GIVE_UP_S + 2.0
#: Bound of the switch row: from the SIGKILL to every worker's first exact result of a step
#: after the one in flight. It holds the switch's start (a Python process for the embedded
#: target), serve's retry interval (controller.primary.RETRY_S, 2 s), the pipeline push (the
#: embedded target compiles the P4 source it is pushed: 3 to 7 s measured on the loaded 2-core
#: machine), the job's re-install, and the workers' retransmission back-off (max_rto 1 s).
SWITCH_RECOVERY_S = 15.0
#: give_up_s of the workers of the switch and serve rows: longer than a switch's recovery, so a
#: step in flight is retried into the fresh switch, not abandoned.
LONG_GIVE_UP_S = 20.0
#: Bound of the serve row: from the new serve's first line to every worker re-seated: one
#: heartbeat interval (lease / 3) plus gRPC's reconnection back-off (1 s, x1.6, +-20 %, as the
#: channel has been failing for the whole downtime).
SERVE_LEASE_S = 3.0
SERVE_RESEAT_S = SERVE_LEASE_S / 3 + 4.0
#: Seconds serve is down in the serve row (drawn per kill).
SERVE_DOWN_S = (1.0, 2.0)
#: Kills per row.
KILL_COUNTS = {"full": {"worker": 4, "switch": 3, "serve": 3},
               "quick": {"worker": 2, "switch": 2, "serve": 2}}
_STEADY_STEPS = 2              # steps every worker completes between two kills
_EVENT_TIMEOUT_S = 90.0        # generous: a loaded 2-core machine starts processes slowly


# ------------------------------------------------------------------------------------------
# Helpers of the rows
# ------------------------------------------------------------------------------------------
def _steady(workers: Sequence[Child], steps: int = _STEADY_STEPS,
            timeout: float = _EVENT_TIMEOUT_S) -> None:
    """Wait until every worker has completed ``steps`` more steps."""
    targets = [len(w.of("done")) + steps for w in workers]
    for w, target in zip(workers, targets):
        got = w.wait_event(lambda e, w=w, target=target: e["event"] == "done"
                           and len(w.of("done")) >= target, timeout=timeout)
        if got is None:
            raise RuntimeError(f"{w.name} made no progress ({len(w.of('done'))} steps done, "
                               f"failed {w.of('failed')[-1:]}): {w.log_tail()}")


def _in_flight(child: Child) -> int:
    """The step a worker is in: the last one it started, or the next when that one is over
    (it is between two steps)."""
    last = _last(child, "start")["step"]
    over = any(e["step"] == last for e in child.of("done") + child.of("failed"))
    return last + 1 if over else last


def _last(child: Child, kind: str) -> Optional[dict]:
    events = child.of(kind)
    return events[-1] if events else None


def _run_row(body: Callable[[Path], Row], name: str, target: str, inputs: str,
             must_hold: str, count: int) -> Row:
    """``body(logdir)`` with a fresh log folder (removed after, kept on a failed row for a
    look: its path is in the details); a harness error is a failed row."""
    started = time.monotonic()
    logdir = Path(tempfile.mkdtemp(prefix="hina-kills-"))
    try:
        row = body(logdir)
    except Exception as exc:  # noqa: BLE001 - reported in the row
        row = Row(name, target, inputs, count, must_hold, f"harness error: {exc!r}"[:600], False,
                  details={"logs": str(logdir)})
    row.seconds = time.monotonic() - started
    if row.ok:
        shutil.rmtree(logdir, ignore_errors=True)
    else:
        row.details["logs"] = str(logdir)
    return row


def _check_program(target: str, program: str) -> str:
    """The row's target column for ``program`` on ``target`` (``embedded, tna``: the TNA program
    on the embedded target's TNA dataplane; BMv2 runs only the v1model program)."""
    if program not in programs.PROGRAMS:
        raise ValueError(f"program {program!r}: one of {tuple(programs.PROGRAMS)}")
    if program == "tna" and target != "embedded":
        raise ValueError(f"program tna: the embedded target runs it, not {target}")
    return target_label(target, program)


def _fmt(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values) or "-"


# ------------------------------------------------------------------------------------------
# Row: SIGKILL of a worker process mid-allreduce
# ------------------------------------------------------------------------------------------
KILL_WORKER_INPUT = ("SIGKILL of a worker process mid-allreduce (3 worker processes, int32 SUM "
                     "steps of {elements} elements); all but the last kill replaced by a standby "
                     "process that joins once the seat's lease ({lease:g} s) ran out")
KILL_WORKER_HOLD = (f"never a wrong sum; replaced: every worker (survivors in the new "
                    f"generation) exact in the interrupted step within {WORKER_RECOVERY_S:g} s "
                    f"of the replacement's Join, one generation per replacement; not replaced: "
                    f"the survivors fail (TransportTimeout) within {WORKER_FAIL_BOUND_S:g} s of "
                    f"the kill")


def row_kill_worker(kills: int, seed: int = 8, program: str = "v1model") -> Row:
    """SIGKILL of worker processes on the embedded switch (see the module docstring), running
    ``program`` (``v1model`` or ``tna``: :func:`_check_program`)."""
    inputs = KILL_WORKER_INPUT.format(elements=ELEMENTS, lease=LEASE_S)
    label = _check_program("embedded", program)
    if kills < 2:
        raise ValueError("kills: at least 2 (one replaced, the last not)")

    def body(logdir: Path) -> Row:
        rng = random.Random(seed)
        dep = Deployment(EmbeddedSwitchProcess(N_WORKERS, logdir), logdir, LEASE_S, seed=seed,
                         program=program)
        try:
            dep.start_serve()
            workers = dep.start_workers(WORKER_GIVE_UP_S)
            generation = dep.generation()
            records = []
            for k in range(kills):
                replace = k < kills - 1
                standby = None
                if replace:
                    standby = dep.worker(barrier=False, standby=True, give_up_s=WORKER_GIVE_UP_S)
                    if standby.wait_event(lambda e: e["event"] == "ready") is None:
                        raise RuntimeError(f"standby did not start: {standby.log_tail()}")
                _steady(list(workers.values()))
                time.sleep(rng.uniform(0.05, 0.3))
                victim = rng.randrange(N_WORKERS)
                killed = workers[victim]
                in_step = _last(killed, "start")["step"]
                t_kill = killed.kill()
                survivors = [w for i, w in sorted(workers.items()) if i != victim]
                record = {"kill": k + 1, "victim": victim, "victim_step": in_step,
                          "replaced": replace}
                if not replace:
                    ends = [w.wait_event(lambda e: e["event"] == "failed" and e["t"] > t_kill,
                                         timeout=WORKER_FAIL_BOUND_S + 30) for w in survivors]
                    record["failed_after_s"] = [round(e["t"] - t_kill, 2) if e else None
                                                for e in ends]
                    record["errors"] = sorted({e["error"] for e in ends if e})
                    record["ok"] = all(e is not None and e["error"] == "TransportTimeout" and
                                       e["t"] - t_kill <= WORKER_FAIL_BOUND_S for e in ends)
                    records.append(record)
                    break
                # the survivors are stuck in one step: the one the replacement must join in
                quiet_since = time.monotonic()
                while True:
                    last = max((e["t"] for w in survivors for e in w.of("done")), default=0)
                    now = time.monotonic()
                    if now - max(last, t_kill) > 0.5:
                        break
                    if now - quiet_since > 30:
                        raise RuntimeError("the survivors did not stop")
                    time.sleep(0.05)
                stuck = max(_last(w, "start")["step"] for w in survivors)
                standby.send(f"go {stuck}")
                joined = standby.wait_event(lambda e: e["event"] == "joined")
                if joined is None:
                    raise RuntimeError(f"the replacement did not join: {standby.log_tail()}")
                generation += 1
                everyone = survivors + [standby]
                ends = [w.wait_event(lambda e: e["event"] in ("done", "failed") and
                                     e.get("step") == stuck,
                                     timeout=WORKER_GIVE_UP_S + 30) for w in everyone]
                record.update({
                    "stuck_step": stuck, "join_after_kill_s": round(joined["t"] - t_kill, 2),
                    "generation": joined["generation"],
                    "recovered_after_join_s": [round(e["t"] - joined["t"], 2) if e else None
                                               for e in ends],
                    "followed": sum(1 for w in survivors for e in w.of("follow")
                                    if e["t"] > t_kill)})
                record["ok"] = (all(e is not None and e["event"] == "done" and e["exact"] and
                                    e["t"] - joined["t"] <= WORKER_RECOVERY_S for e in ends)
                                and joined["generation"] == generation)
                records.append(record)
                workers[joined["index"]] = standby
            wrong = dep.wrong()
        finally:
            dep.close()
        replaced = [r for r in records if r["replaced"]]
        final = [r for r in records if not r["replaced"]]
        recov = [max(x for x in r["recovered_after_join_s"] if x is not None)
                 for r in replaced if any(x is not None for x in r["recovered_after_join_s"])]
        steps = sum(len(c.of("done")) for c in dep.children)
        ok = not wrong and len(records) == kills and all(r["ok"] for r in records)
        joins = _fmt([r["join_after_kill_s"] for r in replaced])
        held = (f"{len(records)} kills, {len(wrong)} wrong sums in {steps} results; replaced "
                f"{sum(r['ok'] for r in replaced)}/{len(replaced)} recovered exactly, all "
                f"workers {_fmt(recov)} s after the Join (Join {joins} s after the kill), "
                f"generations {[r['generation'] for r in replaced]}; not "
                f"replaced: survivors failed {', '.join(str(r['errors']) for r in final)} "
                f"{_fmt([x for r in final for x in r['failed_after_s'] if x is not None])} s "
                f"after the kill")
        return Row("kill -9 worker", label, inputs, kills, KILL_WORKER_HOLD, held, ok,
                   details={"kills": records, "wrong": wrong[:5], "results": steps})

    return _run_row(body, "kill -9 worker", label, inputs, KILL_WORKER_HOLD, kills)


# ------------------------------------------------------------------------------------------
# Row: SIGKILL of the switch process mid-job
# ------------------------------------------------------------------------------------------
KILL_SWITCH_INPUT = ("SIGKILL of the switch process mid-job (3 worker processes in int32 SUM "
                     "steps of {elements} elements), started again at once on the same ports; "
                     "hina-ctl serve re-pushes pipeline and job")
KILL_SWITCH_HOLD = (f"never a wrong sum; serve re-installs the switch by itself, in a new "
                    f"generation; the step in flight is retried in it and every worker is "
                    f"exact in the next step within {SWITCH_RECOVERY_S:g} s of the kill; where "
                    f"the kill split a result's multicast (some workers had it and went on), "
                    f"the workers behind fail that step at once (CallMismatch, no give-up wait) "
                    f"and every worker is exact in the next step within the same bound")


def row_kill_switch(kills: int, target: str = "embedded", seed: int = 9,
                    program: str = "v1model") -> Row:
    """SIGKILL of the switch process (``embedded``: softswitch; ``bmv2``: simple_switch_grpc on
    veths), restarted on the same ports; ``hina-ctl serve`` re-installs it. ``program``:
    ``v1model`` (p4/hina.p4) or ``tna`` (p4/tna/hina_tna.p4, the embedded target only: its
    TNA dataplane)."""
    inputs = KILL_SWITCH_INPUT.format(elements=ELEMENTS)
    label = _check_program(target, program)
    if target == "bmv2":
        why = bmv2_missing()
        if why is not None:
            return skipped("kill -9 switch", "bmv2", inputs, KILL_SWITCH_HOLD,
                           f"BMv2 not installed ({why})")

    def body(logdir: Path) -> Row:
        rng = random.Random(seed)
        switch = (Bmv2SwitchProcess(N_WORKERS, logdir) if target == "bmv2"
                  else EmbeddedSwitchProcess(N_WORKERS, logdir))
        dep = Deployment(switch, logdir, LEASE_S * 3, seed=seed, program=program)
        records = []
        try:
            dep.start_serve()
            workers = dep.start_workers(LONG_GIVE_UP_S)
            everyone = list(workers.values())
            for k in range(kills):
                _steady(everyone)
                time.sleep(rng.uniform(0.0, 0.3))
                marks = [len(w.events) for w in everyone]
                in_flight = [_in_flight(w) for w in everyone]
                t_kill = switch.kill()
                switch.restart()
                t_up = time.monotonic()
                # the next allreduce: a step after the one in flight at the kill (it cannot
                # complete before the switch is back with pipeline and job)
                firsts = [w.wait_event(lambda e, s=s: e["event"] == "done" and e["exact"] and
                                       e["step"] > s,
                                       timeout=SWITCH_RECOVERY_S + 30, start=m)
                          for w, m, s in zip(everyone, marks, in_flight)]
                record = _switch_kill_record(k, everyone, marks, in_flight, t_kill, t_up, firsts)
                records.append(record)
            wrong = dep.wrong()
            serve_log = dep.serve_log()
        finally:
            dep.close()
        repushes = serve_log.count("pipeline re-pushed")
        steps = sum(len(c.of("done")) for c in dep.children)
        ok = not wrong and len(records) == kills and all(r["ok"] for r in records) and \
            repushes == kills

        def path(name):
            mine = [r for r in records if r["path"] == name]
            return mine, [max(x for x in r["exact_after_kill_s"] if x is not None)
                          for r in mine if any(x is not None for x in r["exact_after_kill_s"])]

        fast, fast_s = path(SWITCH_PATHS[0])
        split, split_s = path(SWITCH_PATHS[1])
        other = [r for r in records if r["path"] not in SWITCH_PATHS[:2]]
        held = (f"{len(records)} kills, {len(wrong)} wrong sums in {steps} results; serve "
                f"re-pushed pipeline and job {repushes} times (switch up again "
                f"{_fmt([r['switch_up_after_s'] for r in records])} s after the kill); "
                f"{len(fast)} in-flight steps completed exactly, every worker exact in the next "
                f"step {_fmt(fast_s)} s after the kill; {len(split)} kills split a result's "
                f"multicast (the workers behind failed the step with CallMismatch "
                f"{_fmt([x for r in split for x in r['mismatch_after_s']])} s after the kill), "
                f"every worker exact again {_fmt(split_s)} s after the kill"
                + (f"; {len(other)} kills NOT explained: "
                   f"{[r['in_flight_outcome'] for r in other]}" if other else ""))
        return Row("kill -9 switch", label, inputs, kills, KILL_SWITCH_HOLD, held, ok,
                   details={"kills": records, "wrong": wrong[:5], "results": steps,
                            "repushes": repushes})

    return _run_row(body, "kill -9 switch", label, inputs, KILL_SWITCH_HOLD, kills)


#: How the step in flight at a switch kill ended: exact after the re-install; the kill split a
#: result's multicast (some workers exact, the others CallMismatch at the call check); anything
#: else (a TransportTimeout above all: a cause waited out instead of known) is a finding.
SWITCH_PATHS = ("in flight exact", "result split by the kill", "not explained")


def _switch_kill_record(k: int, everyone: Sequence[Child], marks: Sequence[int],
                        in_flight: Sequence[int], t_kill: float, t_up: float,
                        firsts: Sequence[Optional[dict]]) -> dict:
    """What one switch kill did: the in-flight step's outcome per worker, which path it took
    (:data:`SWITCH_PATHS`), the times, and whether it held."""
    flight = [w.wait_event(lambda e, s=s: e["event"] in ("done", "failed") and e["step"] == s,
                           timeout=1)
              for w, s in zip(everyone, in_flight)]
    failed = [e for w, m in zip(everyone, marks) for e in w.events[m:] if e["event"] == "failed"]
    first_failures = [next((e for e in w.events[m:] if e["event"] == "failed"), None)
                      for w, m in zip(everyone, marks)]
    outcome = [("exact" if e["exact"] else "WRONG") if e and e["event"] == "done" else
               e["error"] if e else None for e in flight]
    if all(o == "exact" for o in outcome):
        path = SWITCH_PATHS[0]
    elif (all(o in ("exact", "CallMismatch") for o in outcome) and "exact" in outcome and
          all(e["error"] == "CallMismatch" and e["t"] - t_kill <= SWITCH_RECOVERY_S
              for e in failed)):
        # the split: the workers that had the result went on; the others' check refused
        path = SWITCH_PATHS[1]
    else:
        path = SWITCH_PATHS[2]
    record = {"kill": k + 1, "in_flight_steps": list(in_flight), "in_flight_outcome": outcome,
              "path": path,
              "mismatch_after_s": [round(e["t"] - t_kill, 2) for e in first_failures
                                   if e and e["error"] == "CallMismatch"],
              "switch_up_after_s": round(t_up - t_kill, 2),
              "exact_after_kill_s": [round(e["t"] - t_kill, 2) if e else None for e in firsts],
              "failed_in_between": [f"{e['error']} step {e['step']}: {e.get('message', '')}"
                                    for e in failed]}
    record["ok"] = path != SWITCH_PATHS[2] and all(
        e is not None and e["t"] - t_kill <= SWITCH_RECOVERY_S for e in firsts)
    return record


# ------------------------------------------------------------------------------------------
# Row: SIGKILL of hina-ctl serve mid-job
# ------------------------------------------------------------------------------------------
KILL_SERVE_INPUT = ("SIGKILL of hina-ctl serve mid-job (3 worker processes in int32 SUM steps "
                    "of {elements} elements, --lease {lease:g}), started again on the same "
                    "address {down[0]:g}-{down[1]:g} s later")
KILL_SERVE_HOLD = (f"never a wrong sum, no step fails; aggregation goes on while serve is down; "
                   f"every worker re-seated (same index, no new generation) within "
                   f"{SERVE_RESEAT_S:g} s of the new serve's start")


def row_kill_serve(kills: int, seed: int = 10, program: str = "v1model") -> Row:
    """SIGKILL of ``hina-ctl serve`` with workers aggregating through the embedded switch,
    running ``program`` (``v1model`` or ``tna``: :func:`_check_program`)."""
    inputs = KILL_SERVE_INPUT.format(elements=ELEMENTS, lease=SERVE_LEASE_S, down=SERVE_DOWN_S)
    label = _check_program("embedded", program)

    def body(logdir: Path) -> Row:
        rng = random.Random(seed)
        dep = Deployment(EmbeddedSwitchProcess(N_WORKERS, logdir), logdir, SERVE_LEASE_S,
                         seed=seed, program=program)
        records = []
        try:
            dep.start_serve()
            workers = dep.start_workers(LONG_GIVE_UP_S)
            everyone = [workers[i] for i in sorted(workers)]
            generation = dep.generation()
            for k in range(kills):
                _steady(everyone)
                time.sleep(rng.uniform(0.0, 0.3))
                sessions = [_last(w, "seated")["session"] for w in everyone]
                marks = [len(w.events) for w in everyone]
                t_kill = dep.serve.kill()
                time.sleep(rng.uniform(*SERVE_DOWN_S))
                t_restart = time.monotonic()
                during = sum(1 for w in everyone for e in w.of("done")
                             if t_kill < e["t"] < t_restart)
                t_up = dep.start_serve()
                seated = [w.wait_event(lambda e, s=s: e["event"] == "seated" and
                                       e["session"] != s, timeout=SERVE_RESEAT_S + 30, start=m)
                          for w, s, m in zip(everyone, sessions, marks)]
                record = {"kill": k + 1, "down_s": round(t_up - t_kill, 2),
                          "results_while_down": during,
                          "reseated_after_start_s": [round(e["t"] - t_up, 2) if e else None
                                                     for e in seated],
                          "indices": [e["index"] if e else None for e in seated],
                          "generations": [e["generation"] if e else None for e in seated]}
                record["ok"] = (during > 0 and all(
                    e is not None and e["t"] - t_up <= SERVE_RESEAT_S and
                    e["index"] == i and e["generation"] == generation
                    for i, e in zip(sorted(workers), seated)))
                records.append(record)
            _steady(everyone)            # and they go on after the last restart
            failed = [dict(e, worker=w.name) for w in everyone for e in w.of("failed")]
            wrong = dep.wrong()
            final_generation = dep.generation()
        finally:
            dep.close()
        reseat = [max(x for x in r["reseated_after_start_s"] if x is not None) for r in records
                  if any(x is not None for x in r["reseated_after_start_s"])]
        steps = sum(len(c.of("done")) for c in dep.children)
        ok = (not wrong and not failed and len(records) == kills and
              all(r["ok"] for r in records) and final_generation == generation)
        held = (f"{len(records)} kills, {len(wrong)} wrong sums and {len(failed)} failed steps "
                f"in {steps} results; {', '.join(str(r['results_while_down']) for r in records)} "
                f"results while serve was down ({_fmt([r['down_s'] for r in records])} s); "
                f"all workers re-seated {_fmt(reseat)} s after the new serve's start, same "
                f"indices, generation {final_generation} throughout; {dep.serve_attempts} serve "
                f"processes for {dep.serve_starts} starts")
        return Row("kill -9 serve", label, inputs, kills, KILL_SERVE_HOLD, held, ok,
                   details={"kills": records, "wrong": wrong[:5], "failed": failed[:5],
                            "results": steps, "serve_attempts": dep.serve_attempts})

    return _run_row(body, "kill -9 serve", label, inputs, KILL_SERVE_HOLD, kills)


def kill_rows(mode: str = "full", bmv2: bool = True,
              progress: Callable[[Row], None] = lambda row: None) -> list[Row]:
    """The kill -9 rows in ``mode`` (``full`` or ``quick``): each on the embedded target with
    the v1model program and with the TNA program; the switch row on BMv2 too, where it runs."""
    counts = KILL_COUNTS[mode]
    rows = []
    for make in (lambda: row_kill_worker(counts["worker"]),
                 lambda: row_kill_worker(counts["worker"], program="tna"),
                 lambda: row_kill_switch(counts["switch"], "embedded"),
                 lambda: row_kill_switch(counts["switch"], "embedded", program="tna"),
                 lambda: (row_kill_switch(counts["switch"], "bmv2") if bmv2 else
                          skipped("kill -9 switch", "bmv2",
                                  KILL_SWITCH_INPUT.format(elements=ELEMENTS), KILL_SWITCH_HOLD,
                                  "not asked for (--no-bmv2)")),
                 lambda: row_kill_serve(counts["serve"]),
                 lambda: row_kill_serve(counts["serve"], program="tna")):
        row = make()
        rows.append(row)
        progress(row)
    return rows
