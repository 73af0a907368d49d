"""The checksum controls of :mod:`hina.testing.p4smith`: ``verify_checksum`` and
``update_checksum`` (``csum16``, with or without the payload) for the verify and compute
controls, drawn from a stream of their own (:func:`checksum_rng`) so that the rest of a
seed's program is what it was before them (but for ingress's reads of ``std.checksum_error``
where the verify control is drawn)."""
from __future__ import annotations

import random


def checksum_rng(seed: int) -> random.Random:
    """The stream the checksum controls of ``seed``'s program are drawn from."""
    return random.Random(f"checksums of seed {seed}")


class ChecksumGen:
    """Checksum calls for :class:`hina.testing.p4smith._Gen`, which holds the stream
    (``crng``), the headers, the scope and conditions, and the features used."""

    def checksum_calls(self, kind: str) -> list:
        """1 or 2 ``{kind}_checksum[_with_payload]`` calls (``kind``: ``verify`` or ``update``)
        for the verify or compute control, drawn from :attr:`crng`: ``csum16`` over 1 to 4
        fields of headers and metadata into a 16-bit header field, the condition the
        validity of every header named (the values are specified only then), now and then
        with a condition over the fields too."""
        with self.drawing_from(self.crng):
            r = self.rng
            headers = [("h0", "t0_t")] + self.instances()
            dests = [(inst, text) for inst, typ in headers
                     for text, w in self.fields_of(inst, typ) if w == 16]
            pool = [(inst, text) for inst, typ in headers
                    for text, _ in self.fields_of(inst, typ)] + [(None, m) for m, _ in self.META]
            lines = []
            for _ in range(r.randint(1, 2) if dests else 0):
                inst, dest = r.choice(dests)
                # not the destination itself: p4c copies an `in` list that aliases the
                # `inout` destination into a temporary, which p4c-bm2-ss then refuses
                # ("Only calls to update_checksum ... allowed")
                data = [r.choice([f for f in pool if f[1] != dest]) for _ in range(r.randint(1, 4))]
                # h0 too: a condition may read its fields
                named = sorted({"h0", inst} | {i for i, _ in data if i is not None})
                if any(i is None for i, _ in data):
                    self.used.add("checksum over metadata")
                cond = " && ".join(f"hdr.{i}.isValid()" for i in named)
                if r.random() < 0.4:
                    self.set_scope(valid=frozenset(named))
                    self.scope = [f for f in self.scope if not f[0].startswith("std.")]
                    cond = f"{cond} && {self.cond(1)}"
                payload = r.random() < 0.3
                call = f"{kind}_checksum" + ("_with_payload" if payload else "")
                self.used.add(call)
                fields = ", ".join(text for _, text in data)
                lines.append(f"        {call}({cond}, {{ {fields} }}, {dest}, "
                             f"HashAlgorithm.csum16);")
            return lines
