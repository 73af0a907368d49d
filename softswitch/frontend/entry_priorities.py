"""Priorities of a table's ``entries`` as p4c's front end assigns them (P4_16 1.2.4, 14.2.1.4;
p4c ``frontends/p4/entryPriorities.cpp``), with the table properties ``largest_priority_wins``
(default ``true``) and ``priority_delta`` (default 1).

* No entry names a priority: the entries get 1, 1 + delta, 1 + 2 delta, ... so that an earlier
  entry wins: counted from the last entry when larger priorities win, from the first otherwise.
* Some do: the first entry must; an entry without one takes the previous entry's minus delta
  (larger wins) or plus delta (smaller wins). Only tables with a key that is neither ``exact``
  nor ``lpm`` may name priorities.
* ``const entries`` name none (checked by the type checker).

The engine's tables let the larger priority win; :func:`engine_priorities` turns a table whose
smaller priorities win into that order (BMv2 does the same with p4c's JSON, where the rank of an
entry, not its P4 priority, is written).
"""
from __future__ import annotations

from . import ir
from .scope import error

#: match kinds whose entries need no priority (p4c ``EntryPriorities::requiresPriority``)
NO_PRIORITY_KINDS = ("exact", "lpm")


def _bool_property(d: ir.TableDecl, name: str, default: bool) -> bool:
    prop = d.props.get(name)
    if prop is None:
        return default
    value = getattr(prop[0], "const", None)
    if not isinstance(value, bool):
        raise error(prop[0], f"table {d.name}: {name} must be a boolean constant")
    return value


def _delta(d: ir.TableDecl) -> int:
    prop = d.props.get("priority_delta")
    if prop is None:
        return 1
    value = getattr(prop[0], "const", None)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise error(prop[0], f"table {d.name}: priority_delta must be a positive value")
    return value


def largest_priority_wins(d: ir.TableDecl) -> bool:
    return _bool_property(d, "largest_priority_wins", True)


def entry_priorities(d: ir.TableDecl) -> list[int]:
    """The P4 priority of each of ``d.entries``, in order, as p4c assigns them.

    Raises:
        P4CompileError: priorities named in a table whose keys are all ``exact``/``lpm``; a
            first entry without one when others have one; a priority that is not a constant
            or not positive; priorities that overflow.
    """
    entries = d.entries or []
    largest, delta = largest_priority_wins(d), _delta(d)
    named = [e for e in entries if e.priority is not None]
    if not named:
        n = len(entries)
        return [1 + delta * ((n - 1 - i) if largest else i) for i in range(n)]
    if all(k.match_kind in NO_PRIORITY_KINDS for k in d.keys):
        at = d.keys[0].expr if d.keys else named[0].priority
        raise error(at, f"table {d.name}: key match type does not require priorities, but "
                        "some are specified")
    out: list[int] = []
    current = 0
    for i, e in enumerate(entries):
        if e.priority is not None:
            current = getattr(e.priority, "const", None)
            if isinstance(current, bool) or not isinstance(current, int):
                raise error(e.priority, "an entry's priority must be a constant")
        elif i == 0:
            raise error(e.keyset, f"table {d.name}: the first entry must have a priority "
                                  "(others do)")
        if current <= 0 or current >= 1 << 64:
            raise error(e.priority if e.priority is not None else e.keyset,
                        f"table {d.name}: overflow in priority computation ({current})")
        out.append(current)
        current = current - delta if largest else current + delta
    return out


def engine_priorities(d: ir.TableDecl) -> list[int]:
    """:func:`entry_priorities` in the engine's order (the larger wins); positive."""
    prios = entry_priorities(d)
    if largest_priority_wins(d) or not prios:
        return prios
    top = max(prios) + 1
    return [top - p for p in prios]
