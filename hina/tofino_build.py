"""Compile the TNA program (``p4/tna/hina_tna.p4``) with ``bf-p4c`` and read what it used.

The Tofino compiler (``../shared/p4tools-tofino``, ``bf-p4c``) takes minutes on a big program, so
compiles are cached by a hash of everything that decides their output: every ``.p4`` file under
``p4/``, the defines, the target and the compiler's version line. The cache is
``$HINA_TOFINO_CACHE`` or ``~/.cache/hina/tofino``; each entry is ``<hash>/`` holding the
compiler's output directory ``out/`` (``pipe/tofino.bin``, ``pipe/context.json``,
``pipe/logs/resources.json``, ``pipe/logs/phv.json``, ``bf-rt.json``, the P4Info as
``p4info.txtpb`` and ``p4info.bin``, ...), its log and ``result.json`` (exit status, seconds). A
failed compile is cached too (its log is the diagnosis).

The P4Info comes in two flavours (``p4info_externs``): ``tofino``, the compiler's default, where
TNA ``Register``s and ``Counter``s are P4Info ``externs`` (``barefoot.Register``, extern type 139;
``barefoot.Counter``, 131) named ``pipe.<control>.<name>``; and ``standard``
(``--p4runtime-force-std-externs``), where they are P4Runtime's own ``registers`` and
``counters`` named ``<control>.<name>``, the form Stratum serves. The P4Info is written only when
a flavour is asked for (``hina-ctl --target tofino`` does); the flavour is then part of the cache
key, and compiles without it (the fit benchmark's and tests') keep the key they had.

Figures are read from the compiler's own output, never assumed:

* stages: ``len(resources.json ["resources"]["mau"]["mau_stages"])`` against ``nStages``;
* per stage: SRAMs, TCAMs, map RAMs, stateful ALUs (``meter_alus``), logical tables;
* lanes (words aggregated per pass): the stateful ALUs bound to ``lanes.lane_<i>`` registers;
* words per packet: the 32-bit payload fields (``hdr.words_a.w<i>``, ``hdr.words_b.w<i>``) the
  PHV allocation (``phv.json``) placed in ingress containers, or (Tofino 2) carried whole in a
  CLOT (``resources.json``'s ``clots``);
* PHV: containers of each width the allocation used, per gress.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

from hina import programs

#: The repository root (this file is hina/tofino_build.py).
#: where the P4 programs are (``p4/`` in the checkout, ``hina/p4/`` installed); paths in the
#: cache key are relative to its parent, so both give the same key
ROOT = programs.P4_DIR.parent
#: The TNA program.
TNA_PROGRAM = programs.P4_DIR / "tna" / "hina_tna.p4"
#: Stage budgets (the compiler's nStages says the same; kept for messages).
TARGETS = {"tofino": ("tofino", "tna"), "tofino2": ("tofino2", "t2na")}
#: The P4Info files every compile writes into ``out/`` (``--p4runtime-files``; format by suffix).
P4INFO_FILES = ("p4info.txtpb", "p4info.bin")
#: P4Info flavours: the compiler's default (TNA externs) and P4Runtime's standard externs.
P4INFO_EXTERNS = {"tofino": (), "standard": ("--p4runtime-force-std-externs",)}


class TofinoCompilerMissing(RuntimeError):
    """``bf-p4c`` is not installed (``bash ../shared/p4tools-tofino/install.sh`` as root)."""


def compiler() -> str:
    """Path of ``bf-p4c``, or raise :class:`TofinoCompilerMissing`."""
    path = shutil.which("bf-p4c")
    if path is None:
        raise TofinoCompilerMissing(
            "bf-p4c not found: install ../shared/p4tools-tofino (bash install.sh, as root)")
    return path


def compiler_version() -> str:
    """The version line of ``p4c-barefoot`` (part of the cache key)."""
    barefoot = shutil.which("p4c-barefoot") or compiler()
    out = subprocess.run([barefoot, "--version"], capture_output=True, text=True, timeout=60)
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else ""


def cache_dir() -> Path:
    """``$HINA_TOFINO_CACHE`` or ``~/.cache/hina/tofino``."""
    env = os.environ.get("HINA_TOFINO_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "hina" / "tofino"


def _sources(program: Path) -> List[Path]:
    """Every .p4 file the program can include: all of p4/ (and the program itself)."""
    files = set(programs.P4_DIR.rglob("*.p4"))
    files.add(program.resolve())
    return sorted(files)


def build_key(program: Path, defines: Dict[str, object], target: str,
              version: Optional[str] = None, p4info_externs: Optional[str] = None) -> str:
    """Hash of the sources, the defines, the target, the compiler version and the outputs asked
    for (the P4Info files and flavour, when asked for)."""
    h = hashlib.sha256()
    h.update(f"target={target}\n".encode())
    if p4info_externs is not None:
        _check_externs(p4info_externs)
        h.update(f"p4runtime-files={','.join(P4INFO_FILES)}\n".encode())
        h.update(f"p4info-externs={p4info_externs}\n".encode())
    h.update(f"version={version if version is not None else compiler_version()}\n".encode())
    for name in sorted(defines):
        h.update(f"-D{name}={defines[name]}\n".encode())
    prog = program.resolve()
    h.update(f"program={prog.relative_to(ROOT) if prog.is_relative_to(ROOT) else prog}\n".encode())
    for path in _sources(program):
        h.update(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:24]


@dataclass
class Build:
    """One compile: where its output is and how it went."""

    key: str
    target: str
    defines: Dict[str, object]
    path: Path                 # the cache entry
    returncode: int
    seconds: float             # wall time of the compile that made the entry
    cached: bool               # this call found the entry in the cache

    @property
    def out(self) -> Path:
        return self.path / "out"

    @property
    def p4info_bin(self) -> Path:
        """The binary P4Info the compiler wrote (``--p4runtime-files``)."""
        return self.out / "p4info.bin"

    @property
    def log(self) -> str:
        return (self.path / "compile.log").read_text(errors="replace")

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def resources(self) -> "Resources":
        return read_resources(self.out)


def _check_externs(p4info_externs: str) -> None:
    if p4info_externs not in P4INFO_EXTERNS:
        raise ValueError(f"p4info_externs must be one of {sorted(P4INFO_EXTERNS)}, "
                         f"not {p4info_externs!r}")


def cached_build(program: Path = TNA_PROGRAM, *, target: str = "tofino",
                 defines: Optional[Dict[str, object]] = None,
                 p4info_externs: Optional[str] = None) -> Optional[Build]:
    """The cached compile of exactly these sources, defines, target and compiler, or None (no
    compile is started: a cold compile of the whole program takes tens of minutes)."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {sorted(TARGETS)}, not {target!r}")
    defines = dict(defines or {})
    key = build_key(program, defines, target, p4info_externs=p4info_externs)
    result_file = cache_dir() / key / "result.json"
    if not result_file.exists():
        return None
    result = json.loads(result_file.read_text())
    return Build(key, target, defines, cache_dir() / key, result["returncode"], result["seconds"],
                 True)


def compile_tna(program: Path = TNA_PROGRAM, *, target: str = "tofino",
                defines: Optional[Dict[str, object]] = None, timeout: float = 3600,
                use_cache: bool = True, include_dirs: Sequence[Path] = (),
                p4info_externs: Optional[str] = None) -> Build:
    """Compile ``program`` for ``target`` (``tofino`` or ``tofino2``), from the cache if there.

    ``p4info_externs``: None (no P4Info), ``tofino`` (the compiler's P4Info, TNA externs) or
    ``standard`` (``--p4runtime-force-std-externs``).

    Raises :class:`TofinoCompilerMissing` without ``bf-p4c``; a compile that fails is returned
    (``returncode`` != 0, ``log`` says why), not raised.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {sorted(TARGETS)}, not {target!r}")
    bf = compiler()
    defines = dict(defines or {})
    key = build_key(program, defines, target, p4info_externs=p4info_externs)
    if include_dirs:
        key = hashlib.sha256((key + "".join(f"-I{d}" for d in include_dirs)).encode()).hexdigest()[:24]
    entry = cache_dir() / key
    result_file = entry / "result.json"
    if use_cache and result_file.exists():
        result = json.loads(result_file.read_text())
        return Build(key, target, defines, entry, result["returncode"], result["seconds"], True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=_ensure(cache_dir())))
    chip, arch = TARGETS[target]
    cmd = [bf, "--target", chip, "--arch", arch, "-o", str(tmp / "out")]
    if p4info_externs is not None:
        cmd += ["--p4runtime-files", ",".join(str(tmp / "out" / name) for name in P4INFO_FILES),
                *P4INFO_EXTERNS[p4info_externs]]
    cmd += [f"-D{name}={value}" for name, value in sorted(defines.items())]
    cmd += [f"-I{d}" for d in include_dirs]
    cmd.append(str(program))
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        returncode, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        returncode = -1
        log = f"timed out after {timeout} s\n" + (exc.stdout or b"").decode(errors="replace")
    seconds = time.monotonic() - start
    (tmp / "compile.log").write_text(" ".join(cmd) + "\n" + log)
    (tmp / "result.json").write_text(json.dumps(
        {"returncode": returncode, "seconds": round(seconds, 1), "command": cmd}))
    if entry.exists():
        shutil.rmtree(entry)
    tmp.rename(entry)
    return Build(key, target, defines, entry, returncode, seconds, False)


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Resources:
    """What the compiler used, from its own ``resources.json`` and ``phv.json``."""

    target: str
    stages_used: int
    stages_available: int
    srams: int
    tcams: int
    map_rams: int
    stateful_alus: int
    stateful_alus_available: int
    logical_tables: int
    lanes: int                       # stateful ALUs of lanes.lane_<i> registers
    words_per_packet: int            # 32-bit payload words in ingress PHV or whole in a CLOT
    phv_containers: Dict[str, int] = field(default_factory=dict)   # "ingress 32" -> count
    stage_detail: List[Dict[str, object]] = field(default_factory=list)


_LANE = re.compile(r"\.lanes\.lane_(\d+)$")
_WORD = re.compile(r"^hdr\.words_[ab]\.w(\d+)$")


def read_resources(out: Path) -> Resources:
    """Read ``out/pipe/logs/resources.json`` and ``phv.json`` (written by ``bf-p4c -o out``)."""
    logs = out / "pipe" / "logs"
    res = json.loads((logs / "resources.json").read_text())["resources"]
    mau = res["mau"]
    stages = mau["mau_stages"]
    srams = tcams = map_rams = alus = alus_per_stage = tables = 0
    lanes = set()
    detail = []
    for st in stages:
        n_sram = len(st.get("rams", {}).get("srams", []))
        n_tcam = len(st.get("tcams", {}).get("tcams", []))
        n_map = len(st.get("map_rams", {}).get("maprams", []))
        meters = st.get("meter_alus", {})
        n_alu = len(meters.get("meters", []))
        n_tab = len(st.get("logical_tables", {}).get("ids", []))
        for meter in meters.get("meters", []):
            for use in meter.get("usages", []):
                m = _LANE.search(use.get("used_by", ""))
                if m:
                    lanes.add(int(m.group(1)))
        srams += n_sram
        tcams += n_tcam
        map_rams += n_map
        alus += n_alu
        alus_per_stage = max(alus_per_stage, meters.get("nAlus", 0))
        tables += n_tab
        detail.append({"stage": st.get("stage_number"), "srams": n_sram, "tcams": n_tcam,
                       "stateful_alus": n_alu, "logical_tables": n_tab})
    phv = json.loads((logs / "phv.json").read_text())
    containers: Dict[str, int] = {}
    words = set()
    for c in phv.get("containers", []):
        label = f"{c.get('gress')} {c.get('bit_width')}"
        containers[label] = containers.get(label, 0) + 1
        if c.get("gress") != "ingress":
            continue
        for sl in c.get("slices", []):
            m = _WORD.match(sl.get("field_slice", {}).get("field_name", ""))
            if m:
                words.add(sl["field_slice"]["field_name"])
    # Tofino 2 carries bytes no table touches in CLOTs, past the PHV: a payload word whole in
    # a CLOT is carried as one in PHV is (resources.json lists each field's bits in CLOTs).
    for gress in res.get("clots", []):
        if gress.get("gress") != "ingress":
            continue
        for f in gress.get("clot_eligible_fields", []):
            if _WORD.match(f.get("name", "")) and f.get("bit_width") and \
                    f.get("num_bits_in_clots") == f["bit_width"]:
                words.add(f["name"])
    manifest = json.loads((out / "manifest.json").read_text()) if (out / "manifest.json").exists() else {}
    return Resources(
        target=manifest.get("target", ""),
        stages_used=len(stages), stages_available=mau.get("nStages", 0),
        srams=srams, tcams=tcams, map_rams=map_rams,
        stateful_alus=alus, stateful_alus_available=alus_per_stage * mau.get("nStages", 0),
        logical_tables=tables, lanes=len(lanes), words_per_packet=len(words),
        phv_containers=dict(sorted(containers.items())), stage_detail=detail)


# ------------------------------------------------------------------------------------------
# The parser the compiler emitted
# ------------------------------------------------------------------------------------------
#: What is known to produce parser defects: bf-p4c 9.13.4 of p4c 1.2.5.16 (the one in
#: ../shared/p4tools-tofino) loses the match registers of parser selects on packet data, so
#: each lowered select keeps a bare ``*`` on every transition and only the first is taken.
PARSER_BUG = ("p4c issue #5752, fixed by p4c PR #5753: the Tofino back end "
              "drops the match registers of parser selects, every transition of a select "
              "becomes a bare '*' and only the first is ever taken")
# a transition's match key in a .bfa parser state: '*', or a value with '*' don't-care digits
_ROW_KEY = re.compile(r"^(\*|0x[0-9a-fA-F*]+|0b[01*]+|\d+)$")


@dataclass(frozen=True)
class ParserState:
    """One state of a compiled parser, as the assembler input (``.bfa``) writes it."""

    pipe: str
    gress: str
    name: str
    matches: bool             # a ``match:`` line says what the rows compare
    rows: tuple               # the transitions' match keys, in order ('*', '0x0800', '0b**')


@dataclass(frozen=True)
class ParserDefect:
    """A parser state of the compiled program with transitions that can never be taken: an
    earlier row of the state matches every packet."""

    pipe: str
    gress: str
    state: str
    rows: int                 # transitions of the state
    unreachable: int          # of them, behind a match-everything row

    def __str__(self) -> str:
        return (f"{self.pipe} {self.gress} parser state {self.state}: {self.unreachable} of its "
                f"{self.rows} transitions are never taken (an earlier one matches everything)")


def _matches_everything(key: str) -> bool:
    return key == "*" or (key[:2] in ("0x", "0b") and set(key[2:]) == {"*"})


def parser_states(out: Path) -> List[ParserState]:
    """Every parser state of ``out/<pipe>/*.bfa`` (``bf-p4c -o out``), each pipe and gress."""
    states: List[ParserState] = []
    for bfa in sorted(Path(out).glob("*/*.bfa")):
        gress = name = None
        matches, rows = False, []

        def close() -> None:
            if gress and name:
                states.append(ParserState(bfa.parent.name, gress, name, matches, tuple(rows)))

        for line in bfa.read_text(errors="replace").splitlines():
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            indent = len(line) - len(line.lstrip(" "))
            if indent == 0:               # "parser ingress:", "deparser ingress:", "stage 0 ..."
                close()
                name = None
                words = line.split()
                gress = words[1].rstrip(":") if words[0] == "parser" and len(words) > 1 else None
            elif gress and indent == 4 and stripped.endswith(":"):
                close()
                name, matches, rows = stripped[:-1], False, []
            elif gress and name and indent == 6:
                if stripped.startswith("match:"):
                    matches = True
                elif stripped.endswith(":") and _ROW_KEY.match(stripped[:-1]):
                    rows.append(stripped[:-1])
        close()
    return states


def parser_defects(out: Path) -> List[ParserDefect]:
    """Parser states of ``out/<pipe>/*.bfa`` whose transitions after a match-everything row are
    dead (:func:`parser_states`).

    That is how :data:`PARSER_BUG` shows in the output: a select's rows all read ``*``, and no
    ``match:`` line says what they compare. Where the compiler merged such a state into the
    next, nothing is left to see: a clean result says no dead rows were found, not that every
    select survived. An output without ``.bfa`` files gives none.
    """
    found = []
    for st in parser_states(out):
        first_all = next((i for i, k in enumerate(st.rows) if _matches_everything(k)), None)
        if first_all is not None and first_all < len(st.rows) - 1:
            found.append(ParserDefect(st.pipe, st.gress, st.name, len(st.rows),
                                      len(st.rows) - 1 - first_all))
    return found


def assembler_stage_error(log: str) -> Optional[str]:
    """The assembler's 'supports up to N stages, using M' line, if the compile hit it."""
    m = re.search(r"error: (\w+) supports up to (\d+) stages, using (\d+)", log)
    return m.group(0) if m else None


def first_error(log: str) -> Optional[str]:
    """The first ``file(line): ... error`` or ``error:`` line of a compiler log."""
    for line in log.splitlines():
        if "error" in line.lower() and "warning" not in line.lower():
            return line.strip()
    return None


def defines_for(lanes: int, extra: Optional[Iterable[Sequence[object]]] = None) -> Dict[str, object]:
    """The defines of a TNA build with ``lanes`` words per pass."""
    d: Dict[str, object] = {"TNA_LANES": lanes}
    for name, value in extra or ():
        d[str(name)] = value
    return d
