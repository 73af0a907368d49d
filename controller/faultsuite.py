"""The fault and fuzz suite: one function per row of the table in ``docs/reliability.md``.

Each row function runs one kind of fault or fuzzed input against a target, counts what held and
returns a :class:`Row`. ``bench/bench_faults.py`` prints them as a table; ``tests/faults/`` runs
each in quick mode and asserts ``row.ok``. Seeds are fixed: the same counts give the same frames,
faults and requests on every run (times vary).

Rows:

The frame rows (1-2) run on the embedded target with p4/hina.p4 and with the TNA program
(:class:`EmbeddedFrames`), and on BMv2; the link rows (3) and the kill rows (6) on the embedded
target with both programs (``program=``).

1. :func:`row_random_bytes`: random bytes to every switch port.
2. :func:`row_malformed_hina`: fuzzed HINA frames interleaved with a live aggregation.
3. :func:`row_link_faults`: drops, duplicates, reordering and corruption on worker links.
4. malformed P4Runtime requests and 5. malformed job-service requests, in
   :mod:`hina.controller.faultsuite_rpc` (``row_p4runtime_fuzz``, ``row_jobservice_fuzz``).
6. kill -9 rows, in :mod:`hina.controller.faultsuite_kills`: SIGKILL of a worker process
   mid-allreduce, of the switch process mid-job (embedded target and BMv2; restarted, re-pushed
   by ``hina-ctl serve``) and of ``hina-ctl serve`` mid-job, several kills per row.
"""
from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from hina import pipeline
from hina import programs
from hina import protocol as P
from hina.framing import parse_frame
from hina.faults import (MUTATIONS, FaultyLink, HinaFrameFuzzer, LinkFaults, Sender,
                         random_frames)

HINA_P4 = programs.HINA_P4
WORDS = 64                         # small packets: the embedded target is quick, BMv2 too
LIVE_JOB, FUZZ_JOB = 3, 5
N_SLOTS = 4


@dataclass
class Row:
    """One row of the results table."""
    name: str
    target: str
    inputs: str            # the fault or input
    count: int             # how many (frames, requests, kills)
    must_hold: str
    held: str              # what held, counted
    ok: bool
    seconds: float = 0.0
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("name", "target", "inputs", "count", "must_hold",
                                               "held", "ok", "seconds", "details")}


def skipped(name: str, target: str, inputs: str, must_hold: str, why: str) -> Row:
    return Row(name, target, inputs, 0, must_hold, f"skipped: {why}", True)


# ------------------------------------------------------------------------------------------
# Frame targets: the embedded switch in process, or BMv2 on veths
# ------------------------------------------------------------------------------------------
def _worker(index: int) -> pipeline.WorkerAddress:
    return pipeline.WorkerAddress(port=index + 1, mac=0x020000000100 + index,
                                  ip=0x0A000100 + index, udp_port=40000 + index)


def frame_jobs() -> tuple[pipeline.JobSpec, pipeline.JobSpec]:
    """The live job (2 workers, ports 1-2) and the fuzz job (its worker 0 on port 3 is an
    admitted fuzz sender, worker 1 on port 4 never sends)."""
    live = pipeline.JobSpec(job_id=LIVE_JOB, workers=(_worker(0), _worker(1)), n_slots=N_SLOTS,
                            reg_base=0, words=WORDS)
    fuzz = pipeline.JobSpec(job_id=FUZZ_JOB, workers=(_worker(2), _worker(3)), n_slots=N_SLOTS,
                            reg_base=N_SLOTS, words=WORDS)
    return live, fuzz


STRANGER_PORT = 9
FRAME_PORTS = tuple(range(0, 11))


def compile_program(program: str = "v1model"):
    """``program`` (:data:`hina.programs.PROGRAMS`: ``v1model`` or ``tna``) compiled by the
    embedded target at :data:`WORDS` words per packet."""
    from hina.softswitch.compiler import compile_file
    return compile_file(str(programs.PROGRAMS[program]),
                        defines=programs.program_defines(program, WORDS))


def target_label(target: str, program: str) -> str:
    """A row's target column: ``embedded``, or ``embedded, tna`` for the TNA program."""
    return target if program == "v1model" else f"{target}, {program}"


class EmbeddedFrames:
    """The embedded switch in process with both jobs; frames enter ports directly (what a UDP
    port or an interface delivers), outputs come back at once. ``program``: ``v1model``
    (p4/hina.p4) or ``tna`` (the TNA program on the embedded target's TNA dataplane), the jobs'
    entries in its layout."""

    def __init__(self, program: str = "v1model"):
        from hina.softswitch.switch import Switch
        self.name = target_label("embedded", program)
        self.program = compile_program(program)
        self.switch = Switch()
        self.switch.load(self.program)
        self.info = self.program.info
        self.layout = pipeline.layout_for(self.info.tables)
        for job in frame_jobs():
            for entry in pipeline.job_entries(job, self.layout):
                self.switch.dataplane.table_insert(entry)
            self.switch.dataplane.mcast_group_set(*pipeline.multicast_group(job))

    def run(self, batch, expect_results: int = 0) -> list[tuple[int, bytes]]:
        out = []
        for port, frame in batch:
            out += self.switch.receive(port, bytes(frame))
        return out

    def counters(self, name: str) -> list[int]:
        """The counter ``name`` (its v1model name, :data:`hina.protocol.REASON_COUNTER` or
        :data:`~hina.protocol.JOB_COUNTER`; the layout gives the program's), every index."""
        name = self.layout.counter(name)
        size = next(c.size for c in self.info.counters if c.name == name)
        return [self.switch.dataplane.counter_read(name, i)[1] for i in range(size)]

    def registers(self) -> dict[str, list[int]]:
        dp = self.switch.dataplane
        return {r.name: [dp.register_read(r.name, i) for i in range(r.size)]
                for r in self.info.registers}

    def close(self):
        self.switch.close()


class Bmv2Frames:
    """Real BMv2 (``simple_switch_grpc`` on veths, :class:`controller.bmv2_dataplane.Bmv2Dataplane`)
    with both jobs; a batch of frames is sent back to back, outputs collected until the expected
    RESULTs are in and the ports are quiet."""
    name = "bmv2"

    def __init__(self, quiet_s: float = 0.05, timeout_s: float = 10.0):
        from hina.controller.bmv2_dataplane import Bmv2Dataplane
        from hina.softswitch.compiler import compile_file
        self.info = compile_file(str(HINA_P4), defines={"HINA_WORDS": str(WORDS)}).info
        self.dp = Bmv2Dataplane(HINA_P4, {"HINA_WORDS": WORDS}, ports=FRAME_PORTS, info=self.info)
        self.quiet_s, self.timeout_s = quiet_s, timeout_s
        self.unsendable = 0
        for job in frame_jobs():
            self.dp.table_insert_many(pipeline.job_entries(job))
            self.dp.mcast_group_set(*pipeline.multicast_group(job))

    def run(self, batch, expect_results: int = 0) -> list[tuple[int, bytes]]:
        io = self.dp.io
        got = io.receive(0)
        for port, frame in batch:
            try:
                io.send(port, bytes(frame))
            except OSError:                # e.g. an empty frame: the kernel refuses it
                self.unsendable += 1
        start = last = time.monotonic()
        while True:
            results = sum(1 for _, f in got if len(f) > 42 and f[42] & 0xF == P.MsgType.RESULT)
            now = time.monotonic()
            if results < expect_results:
                wait = start + self.timeout_s - now
            else:
                wait = last + self.quiet_s - now
            if wait <= 0:
                return got
            arrived = io.receive(wait)
            if arrived:
                got += arrived
                last = time.monotonic()

    def counters(self, name: str) -> list[int]:
        size = next(c.size for c in self.info.counters if c.name == name)
        time.sleep(0.2)                       # BMv2 counts a dropped frame after its last output
        return [self.dp.counter_read(name, i)[1] for i in range(size)]

    def registers(self) -> dict[str, list[int]]:
        return {r.name: list(self.dp.register_read_all(r.name)) for r in self.info.registers}

    def close(self):
        self.dp.close()


def bmv2_missing() -> Optional[str]:
    """Why BMv2 cannot run here, or None."""
    try:
        from hina.controller.bmv2_dataplane import harness_missing
    except ImportError as exc:
        return f"BMv2 harness not importable ({exc})"
    return harness_missing()


def _sender(addr: pipeline.WorkerAddress) -> Sender:
    return Sender(addr.port, addr.mac, addr.ip, addr.udp_port)


def _contribution(job: pipeline.JobSpec, worker: int, seq: int, values: np.ndarray) -> tuple:
    from hina.faults import build_frame
    slot, pool = seq % job.n_slots, (seq // job.n_slots) % 2
    header = P.pack_header(P.MsgType.AGGREGATE, P.Op.SUM, job_id=job.job_id, pool=pool,
                           slot=slot, seq=seq, generation=job.generation)
    addr = job.workers[worker]
    return addr.port, build_frame(_sender(addr), header + values.astype(">i4").tobytes())


class LiveAggregation:
    """The live job's rounds, one slot use per round, every RESULT checked bit for bit.

    Round ``seq``: worker 0 contributes, then whatever ``between`` yields is sent, then worker 1
    contributes; each worker must get the sum of both contributions (int32, exact), and any
    RESULT of the live job for a round must equal that round's sum whenever it comes.
    """

    def __init__(self, target, seed: int):
        self.target = target
        self.job = frame_jobs()[0]
        self.rng = np.random.default_rng(seed)
        self.refs: dict[int, bytes] = {}
        self.seq = getattr(target, "next_seq", 0)
        self.rounds = self.exact = self.wrong = self.missing = 0
        self.other_outputs: Counter = Counter()

    def check_outputs(self, outputs) -> dict[int, int]:
        """Check every output frame; returns RESULTs of the live job per port (a RESULT with
        other sums or a bad UDP checksum is wrong)."""
        per_port: Counter = Counter()
        for port, frame in outputs:
            parsed = parse_frame(frame)
            if parsed is None or len(parsed.message) < P.HEADER_BYTES:
                self.other_outputs["short"] += 1
                continue
            msg = parsed.message
            h = P.unpack_header(msg)
            if h["msg_type"] == P.MsgType.RESULT and h["job_id"] == self.job.job_id:
                if self.refs.get(h["seq"]) == msg[P.HEADER_BYTES:] and parsed.checksum_ok:
                    per_port[port] += 1
                else:
                    self.wrong += 1
            else:
                self.other_outputs[P.MsgType(h["msg_type"]).name
                                   if h["msg_type"] in set(P.MsgType)
                                   else f"type{h['msg_type']}"] += 1
        return per_port

    def round(self, between=(), middle: Optional[Callable[[], None]] = None) -> None:
        """One round; ``between`` (port, frame) pairs go in the same batch between the two
        contributions, ``middle()`` is called between them (in-process targets)."""
        seq = self.seq
        self.seq += 1
        self.target.next_seq = self.seq       # the job's sequence goes on in the next row
        values = self.rng.integers(-(1 << 24), 1 << 24, size=(2, WORDS), dtype=np.int64)
        self.refs[seq] = values.sum(axis=0).astype(">i4").tobytes()
        first = _contribution(self.job, 0, seq, values[0])
        last = _contribution(self.job, 1, seq, values[1])
        if middle is None:
            outputs = self.target.run([first, *between, last], expect_results=2)
        else:
            outputs = self.target.run([first])
            middle()
            outputs += self.target.run([*between, last], expect_results=2)
        per_port = self.check_outputs(outputs)
        self.rounds += 1
        if all(per_port.get(w.port, 0) >= 1 for w in self.job.workers):
            self.exact += 1
        else:
            self.missing += 1


# ------------------------------------------------------------------------------------------
# Row 1: random bytes
# ------------------------------------------------------------------------------------------
ROW1_INPUT = "random bytes, lengths 0..1600, to every switch port (0-10)"
ROW1_HOLD = "no crash; no register or counter change but drop reasons; next aggregation exact"


def row_random_bytes(target, frames: int, rounds: int = 16, seed: int = 1) -> Row:
    """Random bytes into every port of ``target``; registers and counters (but the reason
    counter) unchanged; then ``rounds`` rounds of the live job exact."""
    started = time.monotonic()
    rng = random.Random(seed)
    before = target.registers(), target.counters(P.JOB_COUNTER)
    reasons_before = target.counters(P.REASON_COUNTER)
    batch = [(FRAME_PORTS[i % len(FRAME_PORTS)], f)
             for i, f in enumerate(random_frames(rng, frames))]
    outputs, crashed = [], None
    try:
        for i in range(0, len(batch), 256):
            outputs += target.run(batch[i:i + 256])
    except Exception as exc:  # noqa: BLE001 - a crash is the finding
        crashed = repr(exc)
    # the kernel's own IPv6 frames (neighbour discovery, MLD) leave a veth's switch end too
    kernel = [o for o in outputs if o[1][12:14] == b"\x86\xdd"]
    outputs = [o for o in outputs if o[1][12:14] != b"\x86\xdd"]
    after = target.registers(), target.counters(P.JOB_COUNTER)
    reasons = Counter({P.DropReason(i).name: a - b for i, (a, b) in
                       enumerate(zip(target.counters(P.REASON_COUNTER), reasons_before))
                       if a != b and i in set(P.DropReason)})
    changed = [name for name in before[0] if before[0][name] != after[0][name]]
    if before[1] != after[1]:
        changed.append(P.JOB_COUNTER)
    live = LiveAggregation(target, seed)
    for _ in range(rounds):
        live.round()
    ok = (crashed is None and not changed and not outputs and live.exact == rounds
          and live.wrong == 0)
    held = (f"{'no crash' if crashed is None else 'CRASH ' + crashed}; {len(outputs)} outputs; "
            f"changed: {', '.join(changed) or 'none'}; drop reasons "
            f"{dict(reasons) or '{}'}; {live.exact}/{rounds} rounds exact, {live.wrong} wrong")
    return Row("random bytes", target.name, ROW1_INPUT, frames, ROW1_HOLD, held, ok,
               time.monotonic() - started,
               {"reasons": dict(reasons), "outputs": len(outputs), "changed": changed,
                "rounds": rounds, "exact": live.exact, "kernel_ipv6_frames": len(kernel),
                "unsendable": getattr(target, "unsendable", 0)})


# ------------------------------------------------------------------------------------------
# Row 2: malformed HINA frames
# ------------------------------------------------------------------------------------------
ROW2_INPUT = (f"fuzzed HINA header/payload (scapy fuzz() + {len(MUTATIONS) - 1} mutations) from "
              "admitted and non-admitted senders, interleaved with a live aggregation")
ROW2_HOLD = ("no crash; every RESULT bit-exact; every fuzzed frame counted by a drop reason (or "
             "admitted as the fuzz job's own worker), frames cut inside the HINA header too")


def _fuzz_senders() -> list[Sender]:
    live, fuzz = frame_jobs()
    w0 = _sender(live.workers[0])
    return [w0, _sender(live.workers[1]), _sender(fuzz.workers[0]),
            Sender(STRANGER_PORT, 0x02000000AA01, 0x0A00AA01, 41000),        # unknown worker
            Sender(STRANGER_PORT, w0.mac, w0.ip, w0.udp_port)]               # impostor


SENDER_NAMES = ("live worker 0", "live worker 1", "fuzz-job worker", "stranger", "impostor")


def row_malformed_hina(target, frames: int, per_round: int = 8, seed: int = 2) -> Row:
    """Fuzzed HINA frames between the contributions of the live job's rounds."""
    started = time.monotonic()
    live_job = frame_jobs()[0]
    fuzzer = HinaFrameFuzzer(seed, WORDS, (live_job.job_id, live_job.generation, N_SLOTS),
                             jobs=(LIVE_JOB, FUZZ_JOB))
    senders = _fuzz_senders()
    live = LiveAggregation(target, seed)
    reasons_before = target.counters(P.REASON_COUNTER)
    jobs_before = target.counters(P.JOB_COUNTER)
    per_frame = isinstance(target, EmbeddedFrames)
    short = 0              # frames that end inside the HINA header (counted as MALFORMED)
    outcomes: Counter = Counter()
    by_sender: Counter = Counter()
    uncounted_kinds: Counter = Counter()
    crashed, sent = None, 0
    try:
        while sent < frames:
            between = []
            for _ in range(min(per_round, frames - sent)):
                sender = senders[sent % len(senders)]
                kind, frame = fuzzer.frame(sender)
                between.append((sender.port, frame, kind, SENDER_NAMES[sent % len(senders)]))
                short += len(frame) < 42 + P.HEADER_BYTES
                sent += 1
            if per_frame:
                def middle(between=between):
                    for port, frame, kind, who in between:
                        outcome = _counted(target, port, frame, live)
                        outcomes[outcome] += 1
                        by_sender[who, outcome] += 1
                        if outcome == "uncounted":
                            uncounted_kinds[kind] += 1
                live.round(middle=middle)
            else:
                live.round(between=[(p, f) for p, f, _, _ in between])
    except Exception as exc:  # noqa: BLE001 - a crash is the finding
        crashed = repr(exc)
    reasons = Counter({P.DropReason(i).name: a - b for i, (a, b) in
                       enumerate(zip(target.counters(P.REASON_COUNTER), reasons_before))
                       if a != b and i in set(P.DropReason)})
    counted = sum(reasons.values())
    jobs_after = target.counters(P.JOB_COUNTER)
    # frames the fuzz job admitted (a frame may be admitted and then dropped with a reason:
    # STALE_GENERATION, BAD_SLOT)
    admitted = jobs_after[FUZZ_JOB] - jobs_before[FUZZ_JOB]
    all_counted = counted + admitted >= frames
    if per_frame:
        all_counted = all_counted and outcomes["uncounted"] == 0
        accounting = (f"per frame: {', '.join(f'{k} {v}' for k, v in sorted(outcomes.items()))}"
                      f" ({short} cut inside the HINA header)")
    else:
        accounting = (f"reasons +{counted}, admitted {admitted}, for {frames} frames "
                      f"({short} cut inside the HINA header)")
    ok = crashed is None and live.wrong == 0 and live.exact == live.rounds and all_counted
    held = (f"{'no crash' if crashed is None else 'CRASH ' + crashed}; {live.exact}/{live.rounds}"
            f" rounds exact, {live.wrong} wrong RESULTs; {accounting}")
    return Row("malformed HINA", target.name, ROW2_INPUT, frames, ROW2_HOLD, held, ok,
               time.monotonic() - started,
               {"reasons": dict(reasons), "outcomes": dict(outcomes),
                "mutations": dict(fuzzer.counts), "uncounted_kinds": dict(uncounted_kinds),
                "by_sender": {f"{w}: {o}": c for (w, o), c in sorted(by_sender.items())},
                "other_outputs": dict(live.other_outputs)})


def _counted(target: EmbeddedFrames, port: int, frame: bytes, live: LiveAggregation) -> str:
    """Send one frame into the embedded switch; which drop reason (or admission) counted it."""
    dp = target.switch.dataplane
    reason_counter = target.layout.counter(P.REASON_COUNTER)
    job_counter = target.layout.counter(P.JOB_COUNTER)
    with target.switch.lock:
        reasons = [dp.counter_read(reason_counter, i)[1] for i in range(P.REASONS)]
        jobs = (dp.counter_read(job_counter, FUZZ_JOB)[1], dp.counter_read(job_counter, LIVE_JOB)[1])
        outputs = target.switch.receive(port, frame)
        live.check_outputs(outputs)
        after = [dp.counter_read(reason_counter, i)[1] for i in range(P.REASONS)]
        jobs_after = (dp.counter_read(job_counter, FUZZ_JOB)[1],
                      dp.counter_read(job_counter, LIVE_JOB)[1])
    for i, (a, b) in enumerate(zip(after, reasons)):
        if a != b:
            return P.DropReason(i).name if i in set(P.DropReason) else f"reason{i}"
    if jobs_after[0] != jobs[0]:
        return "admitted (fuzz job)"
    if jobs_after[1] != jobs[1]:
        return "admitted (live job)"
    return "uncounted"


# ------------------------------------------------------------------------------------------
# Row 3: faults on the worker links during allreduce
# ------------------------------------------------------------------------------------------
def run_threads(fn, n: int, timeout: float = 300.0) -> tuple[list, list]:
    """fn(w) on one thread per worker; (results, errors)."""
    results, errors = [None] * n, [None] * n

    def body(w):
        try:
            results[w] = fn(w)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            errors[w] = exc

    threads = [threading.Thread(target=body, args=(w,), daemon=True) for w in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return results, errors


LINK_FAULTS = {
    "drop 5%": LinkFaults(drop=0.05),
    "duplicate 5%": LinkFaults(duplicate=0.05),
    "reorder 10%, window 4": LinkFaults(reorder=0.10, window=4),
    "corrupt 5%, caught by FCS (dropped)": LinkFaults(fcs_corrupt=0.05),
    "corrupt 2%, a bit flip past the FCS": LinkFaults(corrupt=0.02),
}
ROW3_HOLD = "every worker's sum bit-exact; faults cost retransmissions only"


def row_link_faults(fault: str, elements: int, n_workers: int = 3, steps: int = 2,
                    seed: int = 3, program: str = "v1model") -> Row:
    """``steps`` SUM allreduces of ``elements`` int32 per worker with ``fault`` on every worker's
    link, both directions, through the embedded switch running ``program`` (``v1model`` or
    ``tna``) in process, one loopback UDP port per worker
    (:class:`hina.testing.switchjob.LocalJob`)."""
    import dataclasses
    from hina.testing.switchjob import LocalJob
    from hina.worker.transport import Transport
    started = time.monotonic()
    faults = LINK_FAULTS[fault]
    label = target_label("embedded", program)
    inputs = f"{fault} on every worker link, {n_workers} workers x {steps} allreduces of " \
             f"{elements} int32"
    job = LocalJob(compile_program(program), n_workers)
    rng = np.random.default_rng(seed)
    data = [[rng.integers(-(1 << 20), 1 << 20, size=elements, dtype=np.int64).astype(np.int32)
             for _ in range(n_workers)] for _ in range(steps)]
    want = [np.sum(np.stack(d).astype(np.int64), axis=0).astype(np.int32) for d in data]
    links = [FaultyLink(link, dataclasses.replace(faults, seed=seed * 100 + w))
             for w, link in enumerate(job.links)]
    transports = [Transport(link, job.params, min_rto=0.05, give_up_s=20.0) for link in links]
    try:
        results, errors = run_threads(
            lambda w: [transports[w].reduce(P.Op.SUM, data[s][w]) for s in range(steps)],
            n_workers)
        reasons = Counter({P.DropReason(i).name: job.switch.dataplane.counter_read(
            job.layout.counter(P.REASON_COUNTER), i)[1]
            for i in range(1, P.REASONS) if i in set(P.DropReason)})
    finally:
        job.close()
    exact = sum(1 for w in range(n_workers) for s in range(steps)
                if errors[w] is None and np.array_equal(results[w][s], want[s]))
    wrong = sum(1 for w in range(n_workers) for s in range(steps)
                if errors[w] is None and not np.array_equal(results[w][s], want[s]))
    failed = [repr(e) for e in errors if e is not None]
    retrans = sum(t.total.retransmissions for t in transports)
    frames = sum(link.stats["up"].get("frames", 0) + link.stats["down"].get("frames", 0)
                 for link in links)
    injected = Counter()
    for link in links:
        for direction in ("up", "down"):
            for k, v in link.stats[direction].items():
                if k != "frames":
                    injected[k] += v
    total = n_workers * steps
    corrupt_dropped = sum(link.link.dropped_corrupt for link in links)
    ok = exact == total and not failed and (retrans > 0 or fault.startswith("duplicate"))
    if faults.corrupt:          # the flips happened and were caught, by switch and workers
        ok = ok and injected["corrupted"] > 0 and reasons["BAD_CHECKSUM"] > 0
    held = (f"{exact}/{total} sums exact, {wrong} wrong, {len(failed)} failed; "
            f"injected {dict(injected)}; {retrans} retransmissions; switch reasons "
            f"{ {k: v for k, v in reasons.items() if v} }; results dropped by workers' "
            f"checksum check {corrupt_dropped}")
    return Row(f"link faults: {fault}", label, inputs, frames, ROW3_HOLD, held, ok,
               time.monotonic() - started,
               {"exact": exact, "wrong": wrong, "failed": failed, "retransmissions": retrans,
                "results_dropped_corrupt": corrupt_dropped,
                "injected": dict(injected), "reasons": dict(reasons)})


# ------------------------------------------------------------------------------------------
# The whole suite
# ------------------------------------------------------------------------------------------
#: Counts per mode: frames of rows 1-2, int32 elements per allreduce of row 3, requests of
#: rows 6-7.
COUNTS = {"full": {"random": 5000, "hina": 5000, "elements": WORDS * 400, "rpc": 2000},
          "quick": {"random": 300, "hina": 300, "elements": WORDS * 60, "rpc": 150}}


def frame_rows(target, counts: dict) -> list[Row]:
    """Rows 1 and 2 on one frame target (the same seeded frames on every target)."""
    return [row_random_bytes(target, counts["random"]),
            row_malformed_hina(target, counts["hina"])]


def run_suite(mode: str = "full", bmv2: bool = True,
              progress: Callable[[Row], None] = lambda row: None) -> list[Row]:
    """Every row in ``mode`` (``full`` or ``quick``): the frame and link rows on the embedded
    target with both programs (v1model and TNA), the frame rows on BMv2 where it runs."""
    counts = COUNTS[mode]
    rows: list[Row] = []

    def add(row):
        rows.append(row)
        progress(row)

    for program in programs.PROGRAMS:          # p4/hina.p4, then the TNA program
        target = EmbeddedFrames(program)
        try:
            for row in frame_rows(target, counts):
                add(row)
        finally:
            target.close()
    why = bmv2_missing() if bmv2 else "not asked for (--no-bmv2)"
    if why is None:
        target = Bmv2Frames()
        try:
            for row in frame_rows(target, counts):
                add(row)
        finally:
            target.close()
    else:
        add(skipped("random bytes", "bmv2", ROW1_INPUT, ROW1_HOLD, f"BMv2 not installed ({why})"
                    if bmv2 else why))
        add(skipped("malformed HINA", "bmv2", ROW2_INPUT, ROW2_HOLD,
                    f"BMv2 not installed ({why})" if bmv2 else why))
    for program in programs.PROGRAMS:
        for fault in LINK_FAULTS:
            add(row_link_faults(fault, counts["elements"], program=program))
    from .faultsuite_rpc import row_jobservice_fuzz, row_p4runtime_fuzz  # they import this module
    add(row_p4runtime_fuzz(counts["rpc"]))
    add(row_jobservice_fuzz(counts["rpc"]))
    from .faultsuite_kills import kill_rows      # it imports this module
    kill_rows(mode, bmv2=bmv2, progress=add)
    return rows


def markdown(rows: list[Row]) -> str:
    """The results table as Markdown."""
    lines = ["| fault or input | target | how many | what must hold | what held | ok | s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r.inputs if r.name in r.inputs else f"{r.name}: {r.inputs}", r.target,
                 f"{r.count:,}", r.must_hold, r.held,
                 "yes" if r.ok else "**NO**", f"{r.seconds:.1f}"]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)
