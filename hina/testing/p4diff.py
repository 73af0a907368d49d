"""Frames for :mod:`hina.testing.p4smith`'s random programs, and the differential run of one
program on two targets (the embedded target and BMv2), compared byte for byte.

:func:`packets` draws frames that follow a program's parser paths (select values, masks and
ranges hit, lookahead bytes, stacks filled and overflowed, now and then a frame cut short);
:func:`differential` compiles a program with p4c and the embedded target's compiler, sends the
same frames through both and compares every output frame, register, counter and digest.

Example::

    >>> from hina.testing.p4smith import generate
    >>> from hina.testing.p4diff import packets
    >>> len(packets(generate(7), 3)) == 3
    True
"""
from __future__ import annotations

import random
from collections import Counter

from .p4smith import (CLONE_PORT, CLONE_SESSION, MCAST_GROUP, MCAST_REPLICAS, MIN_FRAME,
                      Program, generate, veth_carries)

#: seconds to wait, after the last frame, for BMv2's digests (PI streams them from its own
#: thread; a digest may trail its frame's output)
DIGEST_WAIT_S = 0.3

__all__ = ["EmbeddedRefused", "GeneratorBug", "differential", "packets"]


def _value(rng: random.Random, w: int, hints: dict) -> int:
    """A field value: one the program names (a table's or a select's) often, edge values too."""
    named = hints.get(w, ())
    if named and rng.random() < 0.4:
        return rng.choice(named)
    return rng.choice([0, 1, (1 << w) - 1, 1 << (w - 1), rng.getrandbits(w)])


def _case_value(rng: random.Random, w: int, keyset: tuple) -> int:
    kind = keyset[0]
    if kind == "v":
        return keyset[1]
    if kind == "m":
        return keyset[1] | (rng.getrandbits(w) & ~keyset[2] & ((1 << w) - 1))
    if kind == "r":
        return rng.randint(keyset[1], keyset[2])
    return rng.getrandbits(w)


def _frame(rng: random.Random, program: Program) -> bytes:
    """One frame along a path of the program's parser: at each select a case (or the default)
    is chosen and the fields (or the lookahead byte) made to match it."""
    out = bytearray()
    forced = b""             # bytes a lookahead decided: the next header starts with them
    state, steps = "start", 0
    while state in program.parser and steps < 12:
        steps += 1
        st = program.parser[state]
        spec = st["select"]
        choice = None
        if spec is not None:
            options = spec["cases"] + [(None, spec["default"])]
            choice = rng.choice(options)
        if st["extract"] is None:                   # a lookahead dispatch
            parts, state = choice
            lw = spec["lookahead"]
            v = _case_value(rng, lw, parts[0]) if parts else rng.getrandbits(lw)
            forced = v.to_bytes(lw // 8, "big")
            continue
        values = [_value(rng, w, program.hints) for w in st["extract"]]
        if choice is not None and choice[0] is not None:
            for j, keyset in zip(spec["keys"], choice[0]):
                values[j] = _case_value(rng, st["extract"][j], keyset)
        packed = 0
        for v, w in zip(values, st["extract"]):
            packed = (packed << w) | (v & ((1 << w) - 1))
        head = bytearray(packed.to_bytes(sum(st["extract"]) // 8, "big"))
        head[:len(forced)] = forced[:len(head)]
        forced = b""
        out += head
        state = choice[1] if choice is not None else "accept"
    out += forced
    first = sum(program.parser["start"]["extract"]) // 8
    if len(out) > max(MIN_FRAME, first) and rng.random() < 0.1:
        out = out[:rng.randint(max(MIN_FRAME, first), len(out) - 1)]    # PacketTooShort
    else:
        # a payload of MIN_FRAME bytes at least: the frame out stays observable (a veth drops
        # a frame shorter than MIN_FRAME) whatever headers the program takes out
        out += bytes(rng.getrandbits(8) for _ in range(rng.randint(MIN_FRAME, MIN_FRAME + 6)))
    while len(out) < MIN_FRAME:
        out.append(rng.getrandbits(8))
    if not veth_carries(out):
        out[13] ^= 1            # a VLAN type too short for its tag: a veth would drop it
    return bytes(out)


def packets(program: Program, count: int) -> list[bytes]:
    """``count`` frames for ``program``, each along a path of its parser (:func:`_frame`), each
    one a veth carries (``p4smith.veth_carries``); one in ten cut short after the first header.
    Deterministic in the program's seed."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    rng = random.Random(program.seed * 7919 + 1)
    return [_frame(rng, program) for _ in range(count)]


class GeneratorBug(Exception):
    """p4c rejected a generated program: the generator wrote an ill-typed one."""


class EmbeddedRefused(Exception):
    """p4c compiled a generated program and the embedded target's compiler refused it: a
    disagreement."""


def differential(seed: int, dataplane, workdir, count: int = 8, stats: dict | None = None):
    """Run the program of ``seed`` on the embedded target and on ``dataplane`` (a BMv2
    :class:`controller.bmv2_dataplane.Bmv2Dataplane`, the program compiled by p4c and loaded
    afresh) with the same ``count`` frames, one at a time, then compare every register cell,
    counter cell and digest.

    Each frame goes to BMv2 expecting as many frames out as the embedded target sent (BMv2 waits
    for them, up to its timeout, then a short grace for more): a slow machine delays frames but
    does not lose them, and an extra or a missing frame shows.

    Args:
        seed: the program's seed.
        dataplane: the BMv2 dataplane (``hina.testing.targets.shared_bmv2()``).
        workdir: a folder for the program file (kept: a failing program can be rerun).
        count: frames to send.
        stats: counters to add to: ``frames`` compared, ``unobservable`` frames skipped (the
            embedded target sent a frame a veth drops (``p4smith.veth_carries``): shorter
            than :data:`MIN_FRAME`, seeds 8, 9, 15, 18, 24, 28 of the broadened generator, or
            a VLAN type without room for its tag; BMv2 still gets the frame, for its registers
            and counters), ``cells`` of registers and counters compared,
            ``digests`` compared.

    Returns:
        ``None`` when both targets sent the same frames on the same ports and hold the same
        registers and counters, else a report (the program's path, the first frame or cell
        that differs and each target's values).

    Raises:
        GeneratorBug: p4c rejected the program.
        EmbeddedRefused: p4c accepted it, the embedded target's compiler did not.
    """
    from pathlib import Path

    from hina.controller import bmv2
    from hina.controller.config import ConfigError
    from hina.softswitch.api import P4CompileError
    from hina.softswitch.compiler import compile_file
    from hina.softswitch.p4info import program_info_from_p4info, read_p4info_text

    prog = generate(seed)
    path = Path(workdir) / f"p4smith_{seed}.p4"
    path.write_text(prog.source)
    try:
        build = bmv2.compile_p4c(path)
    except ConfigError as exc:
        raise GeneratorBug(f"seed {seed} ({path}): {exc}") from None
    try:
        embedded = compile_file(str(path)).instantiate()
    except P4CompileError as exc:
        raise EmbeddedRefused(f"seed {seed} ({path}): {type(exc).__name__}: {exc}") from None
    dataplane.load(path, {}, info=program_info_from_p4info(read_p4info_text(str(build.p4info))))
    for target in (embedded, dataplane):
        _replication(target, prog)
    stats = {} if stats is None else stats
    learned: list = []                 # (target, Digest) in the order they were sent
    # copies that took different paths (a clone, a recirculated or resubmitted pass) leave a
    # port in an order BMv2's threads decide (seed 1644): their frames are compared as a
    # multiset per port; a program without such paths keeps its order per port
    paths = prog.clone or bool(prog.features & {"resubmit", "recirculate"})
    for i, frame in enumerate(packets(prog, count)):
        result = embedded.process(0, frame)
        want = result.outputs
        learned += [("embedded", d) for d in result.digests]
        if not all(veth_carries(f) for _, f in want):
            stats["unobservable"] = stats.get("unobservable", 0) + 1
            # BMv2 still takes the frame, its outputs not compared: its registers and counters
            # must see it as the embedded target's did (seed 5221: a counter one packet short)
            result = dataplane.process(0, frame,
                                       expected=sum(veth_carries(f) for _, f in want))
            learned += [("bmv2", d) for d in result.digests]
            continue
        stats["frames"] = stats.get("frames", 0) + 1
        result = dataplane.process(0, frame, expected=len(want))
        got = result.outputs
        learned += [("bmv2", d) for d in result.digests]
        if _per_port(want, paths) != _per_port(got, paths):
            def show(outputs):
                return "\n".join(f"    port {p}: {f.hex()}" for p, f in outputs) or "    nothing"
            return (f"seed {seed} ({path}): frame {i} ({frame.hex()}) differs\n"
                    f"  embedded:\n{show(want)}\n  bmv2:\n{show(got)}")
    if prog.digests:
        learned += [("bmv2", d) for d in dataplane.late_digests(DIGEST_WAIT_S)]
        problem = _compare_digests(prog.digests, learned, stats, unordered=paths)
        if problem:
            return f"seed {seed} ({path}): {problem}"
    for name, size in prog.registers:
        for index in range(size):
            stats["cells"] = stats.get("cells", 0) + 1
            a, b = embedded.register_read(name, index), dataplane.register_read(name, index)
            if a != b:
                return f"seed {seed} ({path}): register {name}[{index}]: embedded {a}, bmv2 {b}"
    for name, size in prog.counters:
        for index in range(size):
            stats["cells"] = stats.get("cells", 0) + 1
            a, b = tuple(embedded.counter_read(name, index)), tuple(dataplane.counter_read(name, index))
            if a != b:
                return (f"seed {seed} ({path}): counter {name}[{index}] (bytes, packets): "
                        f"embedded {a}, bmv2 {b}")
    return None


def _replication(target, prog: Program) -> None:
    """The multicast group and clone session the program uses (:data:`p4smith.MCAST_GROUP`,
    :data:`p4smith.CLONE_SESSION`), the same on both targets."""
    from hina.softswitch.api import CloneSession, Replica
    if prog.multicast:
        target.mcast_group_set(MCAST_GROUP, [Replica(port, rid) for port, rid in MCAST_REPLICAS])
    if prog.clone:
        target.clone_session_set(CloneSession(CLONE_SESSION, (Replica(CLONE_PORT, 0),)))


def _compare_digests(names, learned: list, stats: dict, unordered: bool = False) -> str | None:
    """Each digest type's sequence on both targets: BMv2's must be the embedded target's, but
    for repeats it may drop. A BMv2 learn list drops a sample equal to one not yet acknowledged,
    and simple_switch_grpc acknowledges each notification only once it has passed it on
    (``docs/p4-conformance.md``): a frame sent right after one with the same digest can lose
    its digest. Every generated ``digest`` call has a struct type of its own, so each type is
    one learn list, the one its acknowledgements reach.

    ``unordered`` (a program with clones, resubmits or recirculations): BMv2's threads decide
    when a copy's next pass through ingress learns, as they decide the order of its frames
    (seed 3230: 46, 62, 46, 62 against the embedded target's 46, 46, 62, 62), so each value
    must come as often as on the embedded target, or fewer times but at least once."""
    for name in names:
        want = [d.values for target, d in learned if target == "embedded" and d.name == name]
        got = [d.values for target, d in learned if target == "bmv2" and d.name == name]
        stats["digests"] = stats.get("digests", 0) + len(want)
        if unordered:
            wanted, sent = Counter(want), Counter(got)
            if any(not 1 <= sent[v] <= n for v, n in wanted.items()) or set(sent) - set(wanted):
                return f"digest {name}: embedded {want}, bmv2 {got}"
            dropped = len(want) - len(got)
            if dropped:
                stats["digest repeats BMv2 dropped"] = \
                    stats.get("digest repeats BMv2 dropped", 0) + dropped
            continue
        j, seen = 0, set()
        for values in want:
            if j < len(got) and got[j] == values:
                j += 1
            elif values not in seen:
                return f"digest {name}: embedded {want}, bmv2 {got}"
            else:
                stats["digest repeats BMv2 dropped"] = \
                    stats.get("digest repeats BMv2 dropped", 0) + 1
            seen.add(values)
        if j != len(got):
            return f"digest {name}: embedded {want}, bmv2 {got}"
    return None


def _per_port(outputs: list, unordered: bool = False) -> dict:
    """port -> its frames in order (the order across ports is not BMv2's to keep), sorted when
    ``unordered``."""
    ports: dict = {}
    for port, frame in outputs:
        ports.setdefault(port, []).append(frame)
    return {p: sorted(f) for p, f in ports.items()} if unordered else ports
