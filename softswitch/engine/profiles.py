"""v1model action profiles and action selectors, as BMv2 (``simple_switch``) runs them.

A table whose ``implementation`` is an action profile holds no actions in its entries: each
entry names a *member* of the profile (an action with its arguments), or, with an action
selector, a *group* of members. On a hit on a group, BMv2 hashes the table's ``selector`` keys
with the selector's algorithm (the same calculation as the ``hash`` extern: the fields packed
big-endian, padded to whole bytes) and takes member number ``hash % size`` of the group, the
group's members ordered by their BMv2 member handle (``ActionProfile::GroupMgr::get_from_hash``
over a ``RandAccessUIntSet``). BMv2 gives a new member the lowest free handle, so the order is
the members' creation order, a deleted member's handle going to the next one created: this
module keeps the same handles, and the same packet picks the same member on both targets.

A miss runs nothing: BMv2 has no default entry for such tables (p4c-bm2-ss warns that the
target does not support their ``default_action``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..api import ActionCall, ControlError, GroupRef, MemberRef
from .externs import compute_hash

if TYPE_CHECKING:
    from .tables import Table


class ActionProfile:
    """One ``action_profile`` (``algo`` ``None``) or ``action_selector`` instance.

    Attributes:
        members: member id -> (BMv2 handle, ActionCall).
        groups: group id -> member ids (in the order given).
        tables: the tables it implements.
    """

    def __init__(self, name: str, size: int, algo: Optional[int]):
        self.name, self.size, self.algo = name, int(size), algo
        self.members: dict[int, tuple[int, ActionCall]] = {}
        self.groups: dict[int, tuple[int, ...]] = {}
        self.tables: list["Table"] = []

    @property
    def with_selector(self) -> bool:
        return self.algo is not None

    # ---------------------------------------------------------------------------- data path
    def resolve(self, ref, selector_key: tuple, selector_widths: tuple) -> Optional[ActionCall]:
        """The action an entry's member or group stands for on this packet (``None``: an empty
        group, which runs nothing)."""
        if isinstance(ref, MemberRef):
            return self.members[ref.member_id][1]
        ids = sorted(self.groups[ref.group_id], key=lambda m: self.members[m][0])
        if not ids:
            return None
        h = compute_hash(self.algo, selector_key, selector_widths)
        return self.members[ids[h % len(ids)]][1]

    # ---------------------------------------------------------------------------- control plane
    def _used_by_entries(self, ref) -> bool:
        return any(e.api.action == ref for t in self.tables for e in t.by_id.values())

    def check_ref(self, ref, table: str) -> None:
        """An entry of ``table`` may point to ``ref`` (NOT_FOUND / INVALID_ARGUMENT if not)."""
        if isinstance(ref, MemberRef):
            if ref.member_id not in self.members:
                raise ControlError("NOT_FOUND", f"action profile {self.name} has no member "
                                                f"{ref.member_id} (table {table})")
        elif isinstance(ref, GroupRef):
            if not self.with_selector:
                raise ControlError("INVALID_ARGUMENT", f"table {table}: action profile "
                                   f"{self.name} has no selector, so no groups")
            if ref.group_id not in self.groups:
                raise ControlError("NOT_FOUND", f"action selector {self.name} has no group "
                                                f"{ref.group_id} (table {table})")
        else:
            raise ControlError("INVALID_ARGUMENT", f"table {table} is implemented by action "
                               f"profile {self.name}: its entries name a member or a group, "
                               f"not an action")

    def member_set(self, member_id: int, action: ActionCall) -> None:
        if not isinstance(member_id, int) or member_id < 0:
            raise ControlError("INVALID_ARGUMENT", f"member id {member_id!r} is not valid")
        if not isinstance(action, ActionCall):
            raise ControlError("INVALID_ARGUMENT", f"member {member_id} of {self.name}: "
                               f"{action!r} is not an action")
        for table in self.tables:
            table.direct_impl(action, for_default=False)
        if member_id in self.members:
            handle = self.members[member_id][0]
        else:
            if len(self.members) >= self.size:
                raise ControlError("RESOURCE_EXHAUSTED", f"action profile {self.name} holds "
                                   f"at most {self.size} members")
            used = {h for h, _ in self.members.values()}
            handle = next(h for h in range(len(used) + 1) if h not in used)
        self.members[member_id] = (handle, action)

    def member_delete(self, member_id: int) -> None:
        if member_id not in self.members:
            raise ControlError("NOT_FOUND", f"action profile {self.name} has no member "
                                            f"{member_id}")
        groups = [g for g, ids in self.groups.items() if member_id in ids]
        if groups:
            raise ControlError("FAILED_PRECONDITION", f"member {member_id} of {self.name} is "
                               f"in group(s) {', '.join(map(str, sorted(groups)))}")
        if self._used_by_entries(MemberRef(member_id)):
            raise ControlError("FAILED_PRECONDITION", f"member {member_id} of {self.name} is "
                               f"used by table entries")
        del self.members[member_id]

    def group_set(self, group_id: int, members) -> None:
        if not self.with_selector:
            raise ControlError("INVALID_ARGUMENT", f"action profile {self.name} has no "
                                                   f"selector, so no groups")
        if not isinstance(group_id, int) or group_id < 0:
            raise ControlError("INVALID_ARGUMENT", f"group id {group_id!r} is not valid")
        ids = tuple(members)
        for m in ids:
            if m not in self.members:
                raise ControlError("NOT_FOUND", f"group {group_id} of {self.name}: no member "
                                                f"{m}")
        if len(set(ids)) != len(ids):
            raise ControlError("INVALID_ARGUMENT", f"group {group_id} of {self.name} names a "
                                                   f"member twice")
        if group_id not in self.groups and len(self.groups) >= self.size:
            raise ControlError("RESOURCE_EXHAUSTED", f"action selector {self.name} holds at "
                               f"most {self.size} groups")
        self.groups[group_id] = ids

    def group_delete(self, group_id: int) -> None:
        if group_id not in self.groups:
            raise ControlError("NOT_FOUND", f"action selector {self.name} has no group "
                                            f"{group_id}")
        if self._used_by_entries(GroupRef(group_id)):
            raise ControlError("FAILED_PRECONDITION", f"group {group_id} of {self.name} is "
                                                      f"used by table entries")
        del self.groups[group_id]
