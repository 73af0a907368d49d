"""The device config this target takes in ``SetForwardingPipelineConfig``: a JSON document
with the P4 source (one file, or a bundle of files), compiled here as untrusted input."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Optional, Union

from ..api import CompiledProgram
from ..frontend.bundle import SourceBundle, check_bundle


DEVICE_CONFIG_FORMAT = "softswitch-p4"
DEVICE_CONFIG_VERSION = 1
DEVICE_CONFIG_FIELDS = ("format", "version", "name", "source", "files")   # nothing else is read
# p4/hina.p4 at 256 words makes a 0.45 MiB device config. Below gRPC's default 4 MiB message
# limit, so that an oversize config gets this target's message (with room for the P4Info).
MAX_DEVICE_CONFIG_BYTES = 3 << 20


@dataclasses.dataclass(frozen=True)
class DeviceConfig:
    """This target's ``p4_device_config``: P4 source text, never compiled code.

    Attributes:
        name: the main file's name (a label for diagnostics; never opened on the switch).
        source: the main file: cpp's output (what :func:`make_device_config` sends), or raw P4
            whose ``#include "..."`` name ``files``.
        files: ``(relative path, text)`` pairs: the other files of a raw program's bundle.
    """
    name: str
    source: str
    files: tuple = ()

    @property
    def bundle(self) -> SourceBundle:
        """The program as a :class:`softswitch.frontend.bundle.SourceBundle`."""
        return SourceBundle(self.name, self.source, self.files)


class DeviceConfigTooLarge(ValueError):
    """A device config over :data:`MAX_DEVICE_CONFIG_BYTES` (answered RESOURCE_EXHAUSTED)."""


def make_device_config(program: Union[CompiledProgram, str, os.PathLike]) -> bytes:
    """The ``p4_device_config`` bytes for a program (what ``p4c-bm2-ss``'s JSON is for BMv2).

    Args:
        program: a compiled program, or the path of a ``.p4`` file to compile.

    Returns:
        UTF-8 JSON ``{"format": "softswitch-p4", "version": 1, "name": ..., "source": ...}``.

    Example::

        >>> open("build/hina.bin", "wb").write(make_device_config("p4/hina.p4"))
    """
    if not isinstance(program, CompiledProgram):
        from .compiler import compile_file
        program = compile_file(os.fspath(program))
    document = {"format": DEVICE_CONFIG_FORMAT, "version": DEVICE_CONFIG_VERSION,
                "name": program.name, "source": program.source}
    return json.dumps(document).encode("utf-8")


def make_bundle_device_config(name: str, source: str,
                              files: Optional[dict] = None) -> bytes:
    """The ``p4_device_config`` bytes for raw P4 source: a main file and the files it includes,
    preprocessed on the switch (confined to these files and ``core.p4`` / ``v1model.p4``).

    Args:
        name: the main file's name (for diagnostics).
        source: the main file's text.
        files: relative path -> text of every file the program includes (paths relative to the
            main file's directory, ``/``-separated, no ``..``).

    Returns:
        UTF-8 JSON ``{"format": "softswitch-p4", "version": 1, "name", "source", "files"}``.

    Raises:
        ValueError: a file name the switch would refuse.

    Example::

        >>> main = '#include <v1model.p4>\\n#include "lib/x.p4"\\n...'
        >>> make_bundle_device_config("main.p4", main, {"lib/x.p4": "const bit<8> X = 1;\\n"})
    """
    config = DeviceConfig(name, source, tuple(sorted((files or {}).items())))
    check_bundle(config.bundle)
    document = {"format": DEVICE_CONFIG_FORMAT, "version": DEVICE_CONFIG_VERSION,
                "name": name, "source": source, "files": dict(config.files)}
    data = json.dumps(document).encode("utf-8")
    if len(data) > MAX_DEVICE_CONFIG_BYTES:
        raise DeviceConfigTooLarge(_too_large(len(data)))
    return data


def parse_device_config(data: bytes) -> DeviceConfig:
    """Parse :func:`make_device_config`'s (or :func:`make_bundle_device_config`'s) output.

    Only P4 source text is accepted: a document with any other field (compiled or generated
    code, a pickle, ...) or anything that is not such a JSON document is refused. Nothing in it
    is executed or unpickled; the switch compiles the P4 itself.

    Raises:
        DeviceConfigTooLarge: over :data:`MAX_DEVICE_CONFIG_BYTES`.
        ValueError: not such a document (the message says what is wrong).
    """
    if len(data) > MAX_DEVICE_CONFIG_BYTES:
        raise DeviceConfigTooLarge(_too_large(len(data)))
    if not data:
        raise ValueError("device config is empty: this target needs the P4 program "
                         "(make it with softswitch.p4runtime_server.make_device_config)")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"device config is not a {DEVICE_CONFIG_FORMAT!r} JSON document "
                         f"({_shorten(exc)}); this target accepts only P4 source text: "
                         "compiled code, pickles and other binary artifacts are refused") from None
    if not isinstance(document, dict) or document.get("format") != DEVICE_CONFIG_FORMAT:
        raise ValueError(f"device config is not a {DEVICE_CONFIG_FORMAT!r} document "
                         "(make it with softswitch.p4runtime_server.make_device_config)")
    if document.get("version") != DEVICE_CONFIG_VERSION:
        raise ValueError(f"device config version {_shorten(document.get('version'))} is not "
                         f"supported (this target reads version {DEVICE_CONFIG_VERSION})")
    unknown = sorted(set(document) - set(DEVICE_CONFIG_FIELDS))
    if unknown:
        raise ValueError(f"device config field {_shorten(unknown[0])!r} is not known: this target "
                         f"accepts only P4 source text (fields {', '.join(DEVICE_CONFIG_FIELDS)})")
    name, source = document.get("name"), document.get("source")
    if not isinstance(name, str) or not isinstance(source, str):
        raise ValueError("device config needs string fields 'name' and 'source'")
    files = document.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise ValueError("device config field 'files' must map relative paths to P4 source text")
    config = DeviceConfig(name=name, source=source, files=tuple(sorted(files.items())))
    check_bundle(config.bundle)
    return config


def _too_large(size: int) -> str:
    return (f"device config is {size} bytes; this target accepts at most "
            f"{MAX_DEVICE_CONFIG_BYTES} ({MAX_DEVICE_CONFIG_BYTES >> 20} MiB)")


def _shorten(value: object, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."


