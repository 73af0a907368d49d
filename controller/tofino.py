"""A Tofino behind ``hina-ctl``: the P4Runtime device config, the P4Info and register reads.

A P4Runtime ``SetForwardingPipelineConfig`` carries the P4Info and an opaque, target-specific
``p4_device_config``. Tofino's P4Runtime servers take one of two formats, both built here from
the output of ``bf-p4c -o OUT`` (``OUT/bf-rt.json``, ``OUT/<pipe>/tofino.bin``,
``OUT/<pipe>/context.json``; :func:`read_compiler_output`):

* ``pi`` (:func:`pi_device_config`): PI's legacy packing, what PI's Tofino back end and
  ``stratum_bf`` (Stratum on PI) accept: three length-prefixed blobs, each length a
  little-endian unsigned 32-bit integer::

      u32le(len(name)) name  u32le(len(tofino.bin)) tofino.bin  u32le(len(context.json)) context.json

  As Stratum's ``BfPipelineConfigToPiConfig`` (stratum/hal/lib/barefoot/bf_pipeline_utils.cc)
  writes it when it converts its own format for PI; one pipeline only, as there.
* ``stratum`` (:func:`bf_pipeline_config`): Stratum's ``BfPipelineConfig`` message
  (``hina/tofino_bf.proto``, copied from stratum/hal/lib/barefoot/bf.proto; the only format
  ``stratum_bfrt`` takes): program name, ``bf-rt.json`` and one profile per pipeline.

The P4Info is the compiler's own (``--p4runtime-files``, written by :mod:`hina.tofino_build`
beside the rest, read by :func:`read_p4info`). In the compiler's default flavour a TNA
``Register`` or ``Counter`` is a P4Info **extern** (``barefoot.Register``, extern type 139;
``barefoot.Counter``, 131) named ``pipe.<control>.<name>``; with
``--p4runtime-force-std-externs`` it is a standard ``registers`` / ``counters`` entry named
``<control>.<name>``. :class:`TofinoNames` maps the names ``hina-ctl`` knows (the v1model
program's ``HinaIngress.reason_counter``, a TNA name with or without ``pipe.``, an alias) to
what the P4Info holds, and :class:`TofinoRegisters` reads through P4Runtime ``RegisterEntry`` /
``CounterEntry`` where the P4Info has standard externs. Extern entries (the default flavour)
are refused with a clear error: neither PI's P4Runtime server ("No extern support yet") nor
Stratum ("Extern entries are not currently supported") reads them.

Nothing here has run against a Tofino (no hardware, SDE or Stratum here): the packings are
checked byte for byte, and the push against a local gRPC server that records it
(``tests/controller/test_tofino_ctl.py``).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from hina import protocol as P
from hina.generated import tofino_bf_pb2
from hina.tofino_build import PARSER_BUG, parser_defects

from .p4runtime_client import P4RuntimeClientError, SwitchConnection, pipeline_prefix, register_value

__all__ = ["FORMATS", "PipelineProfile", "CompilerOutput", "TofinoOutputError",
           "pi_device_config", "parse_pi_device_config", "bf_pipeline_config",
           "read_compiler_output", "device_config_from_output", "read_p4info", "TofinoNames",
           "TofinoRegisters", "tna_name", "TNA_INGRESS", "TNA_EGRESS", "EXTERN_REGISTER",
           "EXTERN_COUNTER"]

_U32_MAX = 0xFFFFFFFF
#: ``p4_device_config`` formats: PI's legacy packing, Stratum's BfPipelineConfig.
FORMATS = ("pi", "stratum")
#: The assembler's output per chip (``bf-p4c`` writes one into each pipeline's folder).
BINARIES = ("tofino.bin", "tofino2.bin", "tofino3.bin")
#: Extern type ids of the compiler's P4Info (barefoot/p4info.proto, ``P4Ids.Prefix``).
EXTERN_COUNTER = 131
EXTERN_REGISTER = 139
#: The TNA program's top-level controls (p4/tna/hina_tna.p4), beside the v1model program's
#: ``P.INGRESS`` / ``P.EGRESS``.
TNA_INGRESS = "HinaTnaIngress"
TNA_EGRESS = "HinaTnaEgress"


class TofinoOutputError(ValueError):
    """The compiler output is missing a file or holds an unusable one (the message names it)."""


@dataclass(frozen=True)
class PipelineProfile:
    """One compiled pipeline (a P4 ``Pipeline`` instance) and the hardware pipes it runs on."""

    name: str            # the pipeline's name ("pipe" for ``Pipeline(...) pipe;``)
    context: bytes       # context.json
    binary: bytes        # tofino.bin / tofino2.bin
    pipe_scope: tuple = ()   # hardware pipes; empty: all


@dataclass(frozen=True)
class CompilerOutput:
    """What a P4Runtime server needs from ``bf-p4c -o OUT``."""

    program_name: str
    bfrt: bytes          # bf-rt.json
    profiles: tuple      # of PipelineProfile


# ------------------------------------------------------------------------------------------------
# The two p4_device_config formats
# ------------------------------------------------------------------------------------------------
def _u32le(n: int) -> bytes:
    if not 0 <= n <= _U32_MAX:
        raise ValueError(f"length {n} does not fit a 32-bit length prefix")
    return struct.pack("<I", n)


def pi_device_config(program_name: str, binary: bytes, context: bytes) -> bytes:
    """PI's legacy Tofino ``p4_device_config``: name, binary and context, each u32le-prefixed.

    Args:
        program_name: the P4 program's name (``hina_tna``).
        binary: ``tofino.bin``.
        context: ``context.json``.

    Returns:
        The packed bytes.

    Raises:
        ValueError: an empty program name, binary or context (PI would load nothing).

    Example::

        >>> pi_device_config("p", b"\\x01", b"{}").hex()
        '01000000700100000001020000007b7d'
    """
    name = program_name.encode("utf-8")
    if not name:
        raise ValueError("program name is empty")
    if not binary:
        raise ValueError("tofino.bin is empty")
    if not context:
        raise ValueError("context.json is empty")
    return _u32le(len(name)) + name + _u32le(len(binary)) + binary + _u32le(len(context)) + context


def parse_pi_device_config(blob: bytes) -> tuple:
    """Inverse of :func:`pi_device_config`: ``(program_name, binary, context)``.

    Raises ValueError if a length runs past the end or bytes are left over.
    """
    parts = []
    pos = 0
    for what in ("program name", "tofino.bin", "context.json"):
        if pos + 4 > len(blob):
            raise ValueError(f"truncated before the length of the {what}")
        (n,) = struct.unpack_from("<I", blob, pos)
        pos += 4
        if pos + n > len(blob):
            raise ValueError(f"the {what} ({n} bytes) runs past the end ({len(blob) - pos} left)")
        parts.append(bytes(blob[pos:pos + n]))
        pos += n
    if pos != len(blob):
        raise ValueError(f"{len(blob) - pos} bytes after the context.json")
    return parts[0].decode("utf-8"), parts[1], parts[2]


def bf_pipeline_config(program_name: str, bfrt: bytes,
                       profiles: Sequence[PipelineProfile]) -> bytes:
    """Stratum's ``BfPipelineConfig`` (serialized) for ``p4_device_config``.

    Args:
        program_name: the P4 program's name.
        bfrt: ``bf-rt.json``.
        profiles: one per pipeline, each with its context, binary and pipe scope.

    Returns:
        The serialized message (fields in number order, as protobuf writes them).

    Raises:
        ValueError: no name, no profile, a profile without binary or context, a pipe number
            that is not an unsigned 32-bit integer.
    """
    if not program_name:
        raise ValueError("program name is empty")
    if not profiles:
        raise ValueError("at least one pipeline profile is needed")
    msg = tofino_bf_pb2.BfPipelineConfig(p4_name=program_name, bfruntime_info=bfrt)
    for p in profiles:
        if not p.binary or not p.context:
            raise ValueError(f"profile {p.name!r} lacks its binary or context.json")
        for pipe in p.pipe_scope:
            if not 0 <= pipe <= _U32_MAX:
                raise ValueError(f"pipe {pipe} of profile {p.name!r} out of range 0..{_U32_MAX}")
        msg.profiles.add(profile_name=p.name, context=p.context, binary=p.binary,
                         pipe_scope=list(p.pipe_scope))
    return msg.SerializeToString(deterministic=True)


# ------------------------------------------------------------------------------------------------
# The compiler's output
# ------------------------------------------------------------------------------------------------
def _read(path: Path, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TofinoOutputError(f"{path}: no {what} (is {path.parent} a 'bf-p4c -o' output "
                                "folder of a compile that succeeded?)") from None
    except OSError as exc:
        raise TofinoOutputError(f"{path}: cannot read the {what}: {exc.strerror}") from None
    if not data:
        raise TofinoOutputError(f"{path}: the {what} is empty")
    return data


def _json(path: Path, what: str) -> object:
    data = _read(path, what)
    try:
        return json.loads(data)
    except ValueError as exc:
        raise TofinoOutputError(f"{path}: the {what} is not JSON ({exc})") from None


def read_compiler_output(out_dir: Union[str, Path],
                         program_name: Optional[str] = None) -> CompilerOutput:
    """Collect ``bf-rt.json`` and each pipeline's binary and context from ``bf-p4c -o out_dir``.

    Pipelines are the subfolders holding a ``context.json`` (``pipe`` for this project's
    ``Pipeline(...) pipe``). The program name defaults to the manifest's (without ``.p4``).

    Raises:
        TofinoOutputError: the folder, ``manifest.json`` (without ``program_name``),
            ``bf-rt.json``, every ``<pipe>/context.json`` or a pipeline's binary is missing,
            empty or not JSON where JSON is due; the message names the file.
    """
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise TofinoOutputError(f"{out_dir}: no such folder (the compiler's -o output)")
    if program_name is None:
        manifest = _json(out_dir / "manifest.json", "compiler manifest")
        programs = manifest.get("programs", []) if isinstance(manifest, dict) else []
        if not programs or "program_name" not in programs[0]:
            raise TofinoOutputError(f"{out_dir / 'manifest.json'}: lists no program")
        program_name = Path(programs[0]["program_name"]).stem
    bfrt_path = out_dir / "bf-rt.json"
    _json(bfrt_path, "BF Runtime schema (bf-rt.json)")
    profiles: List[PipelineProfile] = []
    for ctx in sorted(out_dir.glob("*/context.json")):
        pipe_dir = ctx.parent
        _json(ctx, "pipeline context")
        bins = [pipe_dir / n for n in BINARIES if (pipe_dir / n).exists()]
        if not bins:
            raise TofinoOutputError(f"{pipe_dir}: no {' or '.join(BINARIES)} beside the "
                                    "context.json (did the assembler run? a compile that does "
                                    "not fit writes none)")
        profiles.append(PipelineProfile(pipe_dir.name, ctx.read_bytes(),
                                        _read(bins[0], "pipeline binary")))
    if not profiles:
        raise TofinoOutputError(f"{out_dir}: no <pipe>/context.json (not a bf-p4c output, or "
                                "the compile failed)")
    return CompilerOutput(program_name, bfrt_path.read_bytes(), tuple(profiles))


def device_config_from_output(out_dir: Union[str, Path], fmt: str = "pi",
                              program_name: Optional[str] = None,
                              allow_parser_defects: bool = False) -> bytes:
    """``p4_device_config`` for the compiler output in ``out_dir``: ``fmt`` ``pi`` or ``stratum``.

    The PI packing holds one pipeline only (as PI and Stratum's conversion require). An output
    whose parser has transitions that are never taken (:func:`hina.tofino_build.parser_defects`,
    the compiler bug :data:`hina.tofino_build.PARSER_BUG`) is refused: a switch running it would
    parse every packet down one path. ``allow_parser_defects`` builds it anyway (to try the
    control plane against a server, not to run jobs).

    Example::

        >>> blob = device_config_from_output("build/hina_tna", "stratum")   # doctest: +SKIP
    """
    if fmt not in FORMATS:
        raise ValueError(f"device config format must be one of {', '.join(FORMATS)}, "
                         f"not {fmt!r}")
    output = read_compiler_output(out_dir, program_name)
    defects = parser_defects(Path(out_dir))
    if defects and not allow_parser_defects:
        more = f" (and {len(defects) - 1} more)" if len(defects) > 1 else ""
        raise TofinoOutputError(
            f"{out_dir}: the compiled parser is wrong: {defects[0]}{more}. That is the compiler "
            f"bug of {PARSER_BUG}; a switch running this binary parses every packet down one "
            "path. Compile with a bf-p4c that has the fix, or push it anyway with "
            "--allow-parser-defects (to try the control plane, not to run jobs)")
    if fmt == "pi":
        if len(output.profiles) != 1:
            raise TofinoOutputError(f"{out_dir}: PI's packing holds one pipeline, the output "
                                    f"has {len(output.profiles)} "
                                    f"({', '.join(p.name for p in output.profiles)}): use "
                                    "the stratum format")
        p = output.profiles[0]
        return pi_device_config(output.program_name, p.binary, p.context)
    return bf_pipeline_config(output.program_name, output.bfrt, output.profiles)


def read_p4info(out_dir: Union[str, Path]) -> p4info_pb2.P4Info:
    """The P4Info the compiler wrote into ``out_dir`` (``p4info.bin``; ``--p4runtime-files``).

    Binary, not text: the text form spells the Tofino externs' ``Any`` payloads out by type
    name (``[type.googleapis.com/barefoot.Register] {...}``), which a text parser can only read
    with barefoot's p4info.proto loaded; the binary form keeps them as bytes.

    Raises:
        TofinoOutputError: no ``p4info.bin`` (compiled without ``--p4runtime-files``: compile
            through :mod:`hina.tofino_build`), or one that does not parse, or one without tables.
    """
    path = Path(out_dir) / "p4info.bin"
    if not path.exists():
        raise TofinoOutputError(f"{path}: no P4Info (compile with 'bf-p4c --p4runtime-files "
                                f"{Path(out_dir) / 'p4info.bin'}', as hina.tofino_build does)")
    try:
        p4info = p4info_pb2.P4Info.FromString(_read(path, "P4Info"))
    except Exception as exc:      # DecodeError: not a P4Info message
        raise TofinoOutputError(f"{path}: not a binary P4Info ({exc})") from None
    if not p4info.tables:
        raise TofinoOutputError(f"{path}: a P4Info without tables")
    return p4info


# ------------------------------------------------------------------------------------------------
# Names: what hina-ctl asks for -> what the compiler's P4Info holds
# ------------------------------------------------------------------------------------------------
def tna_name(name: str) -> str:
    """The TNA program's name for a v1model program's (``HinaIngress.x`` -> ``HinaTnaIngress.x``).

    Names of the TNA program pass unchanged."""
    for v1, tna in ((P.INGRESS, TNA_INGRESS), (P.EGRESS, TNA_EGRESS)):
        if name == v1 or name.startswith(v1 + "."):
            return tna + name[len(v1):]
    return name


@dataclass(frozen=True)
class P4Object:
    """A register or counter of the compiler's P4Info."""

    kind: str                  # "register" or "counter"
    name: str                  # the P4Info's name
    id: int
    standard: bool             # a P4Runtime register/counter (False: a Tofino extern)
    extern_type_id: int = 0    # for externs: 139 (Register), 131 (Counter)


class TofinoNames:
    """Registers and counters of a Tofino P4Info by every name ``hina-ctl`` may use.

    A name resolves if it is, after :func:`tna_name`: the P4Info's own name, that name without
    the pipeline prefix (``pipe.``) of the default flavour, or a unique alias.

    Example::

        >>> names = TofinoNames(p4info)                            # doctest: +SKIP
        >>> names.counter("HinaIngress.reason_counter").name       # doctest: +SKIP
        'pipe.HinaTnaIngress.reason_counter'
    """

    def __init__(self, p4info: p4info_pb2.P4Info):
        self.objects: Dict[Tuple[str, str], P4Object] = {}
        aliases: Dict[Tuple[str, str], List[P4Object]] = {}
        found: List[Tuple[P4Object, str]] = []
        for r in p4info.registers:
            found.append((P4Object("register", r.preamble.name, r.preamble.id, True),
                          r.preamble.alias))
        for c in p4info.counters:
            found.append((P4Object("counter", c.preamble.name, c.preamble.id, True),
                          c.preamble.alias))
        for ext in p4info.externs:
            kind = {EXTERN_REGISTER: "register", EXTERN_COUNTER: "counter"}.get(
                ext.extern_type_id)
            if kind is None:
                continue
            for inst in ext.instances:
                found.append((P4Object(kind, inst.preamble.name, inst.preamble.id, False,
                                       ext.extern_type_id), inst.preamble.alias))
        prefix = pipeline_prefix(p4info)            # "pipe" in the default flavour, else ""
        for obj, alias in found:
            self.objects[(obj.kind, obj.name)] = obj
            if prefix and obj.name.startswith(prefix + "."):
                self.objects.setdefault((obj.kind, obj.name[len(prefix) + 1:]), obj)
            if alias:
                aliases.setdefault((obj.kind, alias), []).append(obj)
        for key, objs in aliases.items():
            if len(objs) == 1:
                self.objects.setdefault(key, objs[0])

    def _get(self, kind: str, name: str) -> P4Object:
        for candidate in dict.fromkeys((name, tna_name(name))):
            obj = self.objects.get((kind, candidate))
            if obj is not None:
                return obj
        known = sorted({o.name for (k, _), o in self.objects.items() if k == kind})
        raise P4RuntimeClientError(
            f"{kind} {name!r} is not in the Tofino P4Info (nor {tna_name(name)!r}); its "
            f"{kind}s: {', '.join(known[:8]) or 'none'}{' ...' if len(known) > 8 else ''}",
            "NOT_FOUND")

    def register(self, name: str) -> P4Object:
        return self._get("register", name)

    def counter(self, name: str) -> P4Object:
        return self._get("counter", name)


def _extern_refused(obj: P4Object) -> P4RuntimeClientError:
    return P4RuntimeClientError(
        f"{obj.kind} {obj.name} is a Tofino extern in this P4Info (extern type "
        f"{obj.extern_type_id}): P4Runtime servers for Tofino do not read extern entries "
        "(PI: 'No extern support yet'; Stratum: 'Extern entries are not currently supported'); "
        "push with --p4info-externs standard (bf-p4c --p4runtime-force-std-externs) to read "
        f"{obj.kind}s through P4Runtime", "UNIMPLEMENTED")


def _register_zero(register_id: int, index: int) -> p4runtime_pb2.Update:
    entry = p4runtime_pb2.RegisterEntry(register_id=register_id)
    entry.index.index = index
    entry.data.bitstring = b"\x00"
    return SwitchConnection.update("MODIFY", register_entry=entry)


class TofinoRegisters:
    """Registers and counters of a Tofino through P4Runtime, by the names ``hina-ctl`` uses.

    Args:
        switch: a session with the switch (its pipeline's P4Info names the objects).

    Raises (from every read):
        P4RuntimeClientError: the name is not in the P4Info (``NOT_FOUND``), the object is a
            Tofino extern (``UNIMPLEMENTED``, see :func:`_extern_refused`), or the server
            refused the read (its code).
    """

    def __init__(self, switch: SwitchConnection, used: Sequence[Tuple[str, int, int]] = ()):
        self.switch = switch
        #: ``(register, first, count)`` cells jobs were given since the pipeline was pushed
        self.used = list(used)
        self._names: Optional[TofinoNames] = None

    @property
    def names(self) -> TofinoNames:
        if self._names is None:
            self._names = TofinoNames(self.switch.require_index().p4info)
        return self._names

    def register_values(self, name: str, index: Optional[int] = None) -> Dict[int, object]:
        """{index: value} of register ``name`` (every cell when ``index`` is None); a value is
        an integer, or a tuple for a struct register (``slot_bitmap``'s pairs)."""
        obj = self.names.register(name)
        if not obj.standard:
            raise _extern_refused(obj)
        entry = p4runtime_pb2.RegisterEntry(register_id=obj.id)
        if index is not None:
            entry.index.index = index
        return {e.register_entry.index.index: register_value(e.register_entry.data)
                for e in self.switch.read([p4runtime_pb2.Entity(register_entry=entry)],
                                          f"read register {obj.name}")}

    def counter_values(self, name: str,
                       index: Optional[int] = None) -> Dict[int, Tuple[int, int]]:
        """{index: (bytes, packets)} of counter ``name`` (every cell when ``index`` is None)."""
        obj = self.names.counter(name)
        if not obj.standard:
            raise _extern_refused(obj)
        entry = p4runtime_pb2.CounterEntry(counter_id=obj.id)
        if index is not None:
            entry.index.index = index
        return {e.counter_entry.index.index: (e.counter_entry.data.byte_count,
                                              e.counter_entry.data.packet_count)
                for e in self.switch.read([p4runtime_pb2.Entity(counter_entry=entry)],
                                          f"read counter {obj.name}")}

    # -- RegisterAccess (controller.target) ---------------------------------------------------
    def read(self, cells: Sequence[Tuple[str, int]]) -> List[Union[int, tuple]]:
        """The values of ``(register, index)`` cells, in order (a struct cell's as a tuple)."""
        out = []
        for name, index in cells:
            value = self.register_values(name, index).get(index)
            if value is None:
                raise P4RuntimeClientError(f"register {name}[{index}] missing from the answer",
                                           "INTERNAL")
            out.append(value)
        return out

    def unzeroable(self) -> List[Tuple[str, int, int]]:
        """The cells of :attr:`used` in extern registers (zeroing them is refused): what a new
        job is allocated around (:meth:`controller.jobs.JobManager.prepare`)."""
        out = []
        for name, first, count in self.used:
            try:
                if not self.names.register(name).standard:
                    out.append((name, first, count))
            except P4RuntimeClientError:
                continue            # a register of another program: nothing of this one
        return out

    def zero(self, ranges: Sequence[Tuple[str, int, int]]) -> None:
        """Make ``(register, first index, count)`` ranges zero.

        Standard registers (``--p4info-externs standard``) are written: one ``Write`` of
        ``RegisterEntry`` MODIFY updates, one per cell, under the P4Info's ids (Stratum takes
        register writes as MODIFY of bitstring data, one index or all). A Tofino extern register
        (the default flavour) cannot be written through P4Runtime; its cells are zero already
        if no job has held them since the pipeline was pushed (a pushed pipeline starts with
        every register at zero): :attr:`used` lists the cells jobs were given since the push
        (``hina-ctl`` keeps them in its state file). Anything else is refused before a cell is
        written.

        Raises:
            P4RuntimeClientError: a register is not in the P4Info (``NOT_FOUND``), a range of an
                extern register overlaps :attr:`used` (``UNIMPLEMENTED``: the message says how
                to go on), or the switch refused a write.
        """
        wanted = [(self.names.register(name), first, count)
                  for name, first, count in ranges if count > 0]
        used: Dict[int, List[Tuple[int, int]]] = {}
        for name, first, count in self.used:
            try:
                used.setdefault(self.names.register(name).id, []).append((first, count))
            except P4RuntimeClientError:
                continue            # a register of another program: nothing of this one
        updates = []
        for obj, first, count in wanted:
            if obj.standard:
                updates += [_register_zero(obj.id, i) for i in range(first, first + count)]
                continue
            clash = next(((f, c) for f, c in used.get(obj.id, ())
                          if f < first + count and first < f + c), None)
            if clash is not None:
                raise P4RuntimeClientError(
                    f"register {obj.name}[{first}..{first + count - 1}] must be zeroed (a job "
                    f"held cells {clash[0]}..{clash[0] + clash[1] - 1} since the pipeline was "
                    f"pushed), but it is a Tofino extern in this P4Info (extern type "
                    f"{obj.extern_type_id}), which P4Runtime servers for Tofino do not write: "
                    "push the pipeline again (every register starts at zero) or push with "
                    "--p4info-externs standard (bf-p4c --p4runtime-force-std-externs), whose "
                    "registers hina-ctl zeroes", "UNIMPLEMENTED")
        self.switch.write(updates, "zero registers")

    def close(self) -> None:
        """Nothing to release: the connection belongs to the caller."""

    def reason_counts(self) -> Dict[str, int]:
        """Packets per drop/exception reason (``HinaTnaIngress.reason_counter``)."""
        counts = self.counter_values(P.REASON_COUNTER)
        return {reason.name: counts.get(int(reason), (0, 0))[1] for reason in P.DropReason}

    def job_packets(self, job_id: int) -> Dict[str, int]:
        """Packets and bytes the switch admitted for ``job_id`` (``HinaTnaIngress.job_counter``;
        zeroed where the P4Info lets the controller write it, when the job is created)."""
        byte_count, packet_count = self.counter_values(P.JOB_COUNTER, job_id).get(job_id, (0, 0))
        return {"packets": packet_count, "bytes": byte_count}
