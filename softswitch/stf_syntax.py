"""The syntax of p4c's STF files: numbers with ``*`` wildcards, table keys, names, frames and
``expect`` patterns, as ``bmv2stf.py`` reads them. :mod:`softswitch.stf` executes the commands;
this module only turns their words into values (and raises :class:`StfError` for words that are
not STF).
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Callable, Optional

from .api import Exact, FieldMatch, Lpm, MatchFieldInfo, Optional_, Range, Ternary

BITS_PER_DIGIT = {"0x": 4, "0b": 1, "0o": 3}
DIGIT_VALUES = {"0x": "0123456789abcdefABCDEF", "0b": "01", "0o": "01234567"}
COMPARISONS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}
WILDCARD = "*"
STACK_INDEX = re.compile(r"\$([0-9]+)")
EXACT_LENGTH_MARK = "$"

ACTION_CALL = re.compile(r"(?P<name>[A-Za-z_$][\w.$\[\]]*)\s*\((?P<args>[^()]*)\)"
                         r"\s*(?:=\s*(?P<handle>[\w$]+))?\s*$")


class StfError(Exception):
    """A command that is malformed or that the program refuses; becomes an :class:`StfFailure`."""


# ------------------------------------------------------------------------------------------------
# Numbers
# ------------------------------------------------------------------------------------------------
def _split_radix(text: str) -> tuple[str, str]:
    lower = text.lower()
    for prefix in BITS_PER_DIGIT:
        if lower.startswith(prefix):
            return prefix, text[len(prefix):]
    return "", text


def parse_number(text: str) -> int:
    """A decimal, ``0x``, ``0b`` or ``0o`` integer (``_`` separators allowed)."""
    try:
        return int(text.replace("_", ""), 0)
    except ValueError:
        raise StfError(f"{text!r} is not a number") from None


def parse_wildcard_number(text: str) -> tuple[int, int, int]:
    """Digits with ``*`` wildcards: ``(value, mask, bits written)``; ``*`` digits are 0 in both.

    Decimal numbers cannot carry wildcards: their mask is ``-1`` (all bits) and bits written 0.
    """
    prefix, digits = _split_radix(text.replace("_", ""))
    if not prefix:
        return parse_number(text), -1, 0
    bits = BITS_PER_DIGIT[prefix]
    digit_mask = (1 << bits) - 1
    value = mask = 0
    for ch in digits:
        value <<= bits
        mask <<= bits
        if ch == WILDCARD:
            continue
        if ch not in DIGIT_VALUES[prefix]:
            raise StfError(f"{text!r}: {ch!r} is not a digit of a {prefix} number")
        value |= int(ch, 16)
        mask |= digit_mask
    if not digits:
        raise StfError(f"{text!r} has no digits")
    return value, mask, bits * len(digits)


def _full(width: int) -> int:
    return (1 << width) - 1


def parse_match(text: str, match: MatchFieldInfo) -> Optional[FieldMatch]:
    """Turn one STF key value into a :data:`~softswitch.api.FieldMatch` for ``match``."""
    kind, width = match.match_kind, match.bitwidth
    if kind == "exact":
        return Exact(parse_number(text))
    if kind == "ternary":
        if "&&&" in text:
            value_text, _, mask_text = text.partition("&&&")
            return Ternary(parse_number(value_text), parse_number(mask_text))
        value, mask, _ = parse_wildcard_number(text)
        mask &= _full(width)
        return None if mask == 0 else Ternary(value & mask, mask)
    if kind == "lpm":
        if "/" in text:
            value_text, _, len_text = text.partition("/")
            return Lpm(parse_number(value_text), parse_number(len_text))
        if WILDCARD in text:      # 0x0a01**** : the digits before the wildcards are the prefix
            value, _, written = parse_wildcard_number(text)
            wildcard_digits = len(text) - len(text.rstrip(WILDCARD))
            prefix_len = written - wildcard_digits * BITS_PER_DIGIT[_split_radix(text)[0]]
            return Lpm(value, prefix_len) if prefix_len > 0 else None
        return Lpm(parse_number(text), width)
    if kind == "range":
        if ".." in text:
            low_text, _, high_text = text.partition("..")
            return Range(parse_number(low_text), parse_number(high_text))
        value = parse_number(text)
        return Range(value, value)
    if kind == "optional":
        return None if text == WILDCARD else Optional_(parse_number(text))
    raise StfError(f"match kind {kind!r} of {match.name} is not supported")


def next_word(text: str) -> tuple[str, str]:
    """Split off the first whitespace-separated word: ``(word, rest)``, both stripped."""
    parts = text.strip().split(None, 1)
    return (parts[0], parts[1].strip()) if len(parts) == 2 else (parts[0] if parts else "", "")


# ------------------------------------------------------------------------------------------------
# Names
# ------------------------------------------------------------------------------------------------
def resolve_name(name: str, candidates: list[str], kind: str, where: str = "") -> str:
    """Find ``name`` among ``candidates``: equal, else the one unique dotted (or plain) suffix."""
    if name in candidates:
        return name
    for suffix_of in (lambda c: c.endswith("." + name), lambda c: c.endswith(name)):
        found = [c for c in candidates if suffix_of(c)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise StfError(f"{kind} name {name!r} is ambiguous{where}: {', '.join(found)}")
    raise StfError(f"no {kind} named {name!r}{where}; known: {', '.join(candidates) or 'none'}")


def stf_field_name(key: str) -> str:
    """An STF key name as P4Info writes it: ``hdr.vlan$0.vid`` -> ``hdr.vlan[0].vid`` (header
    stack elements, as bmv2stf rewrites them); any other ``$`` is dropped."""
    return STACK_INDEX.sub(r"[\1]", key).replace("$", "")


# ------------------------------------------------------------------------------------------------
# Frames
# ------------------------------------------------------------------------------------------------
def parse_hex_frame(text: str) -> bytes:
    """Packet data: hex digits, whitespace ignored, an even number of digits."""
    digits = "".join(text.split())
    if len(digits) % 2:
        raise StfError(f"packet data has an odd number of hex digits ({len(digits)})")
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise StfError(f"packet data {digits!r} is not hexadecimal") from None


@dataclass(frozen=True)
class Expectation:
    """One ``expect`` line: hex digits with ``*`` wildcards; ``exact_length`` when ``$``."""
    line: int
    pattern: str
    exact_length: bool

    def mismatch(self, frame: bytes) -> Optional[str]:
        """``None`` when ``frame`` matches, else what differs."""
        got = frame.hex().upper()
        if len(got) < len(self.pattern):
            return (f"frame too short: {len(frame)} bytes, expected "
                    f"{'exactly' if self.exact_length else 'at least'} {len(self.pattern) // 2}")
        if self.exact_length and len(got) != len(self.pattern):
            return f"frame too long: {len(frame)} bytes, expected exactly {len(self.pattern) // 2}"
        for i, want in enumerate(self.pattern):
            if want != WILDCARD and want != got[i]:
                return (f"differs at byte {i // 2} (nibble {i}): expected {want}, got {got[i]}\n"
                        f"  expected {self.pattern}\n  received {got}\n"
                        f"           {' ' * i}^")
        return None
