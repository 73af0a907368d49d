"""The P4Runtime ``p4_device_config`` of a Tofino, built from the compiler's output.

A P4Runtime ``SetForwardingPipelineConfig`` carries the P4Info and an opaque, target-specific
``p4_device_config``. Two formats are in use for Tofino (Stratum's README.pipeline.md describes
both):

* :func:`pi_device_config` -- PI's legacy packing, what PI's Tofino back end
  (``pi_update_device_start``) and Stratum's ``stratum_bf`` accept: three length-prefixed
  blobs, each length a little-endian unsigned 32-bit integer::

      u32le(len(name)) name  u32le(len(tofino.bin)) tofino.bin  u32le(len(context.json)) context.json

  Followed from Stratum's ``BfPipelineConfigToPiConfig``
  (stratum/hal/lib/barefoot/bf_pipeline_utils.cc), which converts its own format into exactly
  this; one pipeline profile only, as there.
* :func:`bf_pipeline_config` -- Stratum's ``BfPipelineConfig`` message
  (stratum/hal/lib/barefoot/bf.proto, package ``stratum.hal.barefoot``)::

      message BfPipelineConfig {
        message Profile { string profile_name = 1; bytes context = 2; bytes binary = 3;
                          repeated uint32 pipe_scope = 4; }
        string p4_name = 1; bytes bfruntime_info = 2; repeated Profile profiles = 3;
      }

  The proto is not vendored here, so the message is encoded directly in protobuf's wire
  format (tests check it against protobuf's own encoder on a descriptor built from the same
  definition).

``bf-p4c -o OUT prog.p4`` writes ``OUT/bf-rt.json`` and ``OUT/<pipe>/{tofino.bin,
context.json}`` (``tofino2.bin`` for Tofino 2); :func:`read_compiler_output` collects them.

Not wired into ``hina-ctl`` yet.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

_U32_MAX = 0xFFFFFFFF


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


def _u32le(n: int) -> bytes:
    if not 0 <= n <= _U32_MAX:
        raise ValueError(f"length {n} does not fit a 32-bit length prefix")
    return struct.pack("<I", n)


def pi_device_config(program_name: str, binary: bytes, context: bytes) -> bytes:
    """PI's legacy Tofino ``p4_device_config``: name, binary and context, each u32le-prefixed.

    Raises ValueError on an empty program name, binary or context (PI would load nothing).
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


# Protobuf wire format (https://protobuf.dev/programming-guides/encoding/): a field is its key
# varint (number << 3 | wire type) then its value; wire type 2 = length-delimited.
def _varint(n: int) -> bytes:
    if n < 0:
        raise ValueError("varint of a negative number")
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(number: int, value: bytes) -> bytes:
    # proto3: a field with its default value (empty) is not written.
    if not value:
        return b""
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _profile_message(profile: PipelineProfile) -> bytes:
    scope = b"".join(_varint(p) for p in profile.pipe_scope)   # packed repeated uint32
    return (_bytes_field(1, profile.name.encode("utf-8"))
            + _bytes_field(2, profile.context)
            + _bytes_field(3, profile.binary)
            + _bytes_field(4, scope))


def bf_pipeline_config(program_name: str, bfrt: bytes,
                       profiles: Sequence[PipelineProfile]) -> bytes:
    """Stratum's ``BfPipelineConfig`` (serialized) for ``p4_device_config``."""
    if not program_name:
        raise ValueError("program name is empty")
    if not profiles:
        raise ValueError("at least one pipeline profile is needed")
    for p in profiles:
        if not p.binary or not p.context:
            raise ValueError(f"profile {p.name!r} lacks its binary or context.json")
        for pipe in p.pipe_scope:
            if not 0 <= pipe <= _U32_MAX:
                raise ValueError(f"pipe {pipe} out of range")
    out = _bytes_field(1, program_name.encode("utf-8")) + _bytes_field(2, bfrt)
    for p in profiles:
        # A repeated message field: one key + length per element, written even if empty.
        body = _profile_message(p)
        out += _varint(3 << 3 | 2) + _varint(len(body)) + body
    return out


def read_compiler_output(out_dir: Path, program_name: Optional[str] = None) -> CompilerOutput:
    """Collect ``bf-rt.json`` and each pipeline's binary and context from ``bf-p4c -o out_dir``.

    Pipelines are the subdirectories holding a ``context.json`` (``pipe`` for this project's
    ``Pipeline(...) pipe``). The program name defaults to the manifest's (without ``.p4``).
    """
    out_dir = Path(out_dir)
    manifest_path = out_dir / "manifest.json"
    if program_name is None:
        if not manifest_path.exists():
            raise FileNotFoundError(f"{manifest_path} (pass program_name)")
        programs = json.loads(manifest_path.read_text()).get("programs", [])
        if not programs:
            raise ValueError(f"{manifest_path} lists no program")
        program_name = Path(programs[0]["program_name"]).stem
    bfrt_path = out_dir / "bf-rt.json"
    if not bfrt_path.exists():
        raise FileNotFoundError(bfrt_path)
    profiles: List[PipelineProfile] = []
    for ctx in sorted(out_dir.glob("*/context.json")):
        pipe_dir = ctx.parent
        bins = [pipe_dir / n for n in ("tofino.bin", "tofino2.bin", "tofino3.bin")
                if (pipe_dir / n).exists()]
        if not bins:
            raise FileNotFoundError(f"no tofino*.bin beside {ctx} (did the assembler run?)")
        profiles.append(PipelineProfile(pipe_dir.name, ctx.read_bytes(), bins[0].read_bytes()))
    if not profiles:
        raise FileNotFoundError(f"no <pipe>/context.json under {out_dir}")
    return CompilerOutput(program_name, bfrt_path.read_bytes(), tuple(profiles))


def device_config_from_output(out_dir: Path, fmt: str = "pi",
                              program_name: Optional[str] = None) -> bytes:
    """``p4_device_config`` for the compiler output in ``out_dir``: ``fmt`` ``pi`` or ``stratum``.

    The PI packing holds one pipeline only (as PI and Stratum's conversion require).
    """
    output = read_compiler_output(out_dir, program_name)
    if fmt == "pi":
        if len(output.profiles) != 1:
            raise ValueError(f"PI's packing holds one pipeline, the output has "
                             f"{len(output.profiles)}")
        p = output.profiles[0]
        return pi_device_config(output.program_name, p.binary, p.context)
    if fmt == "stratum":
        return bf_pipeline_config(output.program_name, output.bfrt, output.profiles)
    raise ValueError(f"fmt must be 'pi' or 'stratum', not {fmt!r}")
