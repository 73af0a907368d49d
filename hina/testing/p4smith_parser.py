"""The parser half of :mod:`hina.testing.p4smith`: states over the program's headers, ``select``
keysets (values, masks, ranges, ``_``), a ``lookahead`` dispatch, ``verify``, and the plan
:func:`hina.testing.p4diff.packets` follows to draw frames that take the parser's paths."""
from __future__ import annotations


class ParserGen:
    """Parser generation for :class:`hina.testing.p4smith._Gen` (which holds the random
    generator, the header types and instances, the features used and the value hints)."""

    def keyset(self, w: int, ranges: bool = True) -> tuple[str, tuple]:
        r = self.rng
        full = (1 << w) - 1
        k = r.random()
        v = r.choice([0, 1, full, r.getrandbits(w), r.getrandbits(w)])
        if k < 0.6:
            self.hints.setdefault(w, set()).add(v)
            return f"{w}w{v}", ("v", v)
        if k < 0.8:
            self.used.add("select mask &&&")
            m = r.choice([r.getrandbits(w), full ^ 0xF, 0xF0, full]) & full
            self.hints.setdefault(w, set()).add(v & m)
            return f"{w}w{v & m} &&& {w}w{m}", ("m", v & m, m)
        if k < 0.92 and ranges and w <= 16:
            # p4c expands a range into ternary sets and refuses more than about a hundred
            self.used.add("select range ..")
            lo, hi = sorted((v, r.getrandbits(w)))
            return f"{w}w{lo} .. {w}w{hi}", ("r", lo, hi)
        self.used.add("select _")
        return "_", ("_",)

    def select(self, keys: list, targets: list, indent: str) -> tuple[list, dict]:
        """``transition select(...)`` over ``keys`` ((text, width, field index)); cases to
        ``targets`` (the first always among them) and a default."""
        r = self.rng
        if len(keys) == 2:
            self.used.add("select on a tuple")
        cases, lines, seen = [], [], set()
        # the next state first (tried again if its keyset is left out): every state reachable
        goals = [targets[0]] * 4 + [r.choice(targets) for _ in range(r.randint(0, 3))]
        for i, goal in enumerate(goals):
            if i < 4 and cases:
                continue            # the next state has its case
            parts = []
            for _, w, _ in keys:        # one range a keyset at most (p4c's expansion limit)
                parts.append(self.keyset(w, ranges=not any(p[1][0] == "r" for p in parts)))
            # a keyset matching everything (``_``, a mask of 0 on every key) is left out:
            # p4c-bm2-ss turns it into BMv2's default transition, which the real default then
            # replaces, so BMv2 skips the case where the specification matches it
            # (programs/select_mask_zero_case, xfail on BMv2)
            if all(p[1] == ("_",) or p[1][0] == "m" and p[1][2] == 0
                   or p[1][0] == "r" and p[1][1:] == (0, (1 << k[1]) - 1)
                   for p, k in zip(parts, keys)) or tuple(p[0] for p in parts) in seen:
                continue
            seen.add(tuple(p[0] for p in parts))
            text = parts[0][0] if len(parts) == 1 else "(" + ", ".join(p[0] for p in parts) + ")"
            lines.append(f"{indent}    {text}: {goal};")
            cases.append(([p[1] for p in parts], goal))
        # never the stack's own state: its loop must end (p4c: "never reaches accept")
        default = r.choice([t for t in targets if t != "parse_s"] + ["accept"])
        self.used.add("select default")
        on = ", ".join(k[0] for k in keys)
        return ([f"{indent}transition select({on}) {{", *lines,
                 f"{indent}    default: {default};", f"{indent}}}"],
                {"keys": [k[2] for k in keys], "cases": cases, "default": default})

    def parser(self) -> tuple[list, dict]:
        r = self.rng
        states = [(inst, typ) for inst, typ in self.opt]
        if self.stack:
            states.append(("s", "s_t"))
        r.shuffle(states)
        names = [f"parse_{inst}" for inst, _ in states]
        if names and r.random() < 0.4:
            # a lookahead dispatch: before a header state, chooses among the later ones
            at = r.randrange(len(names))
            states.insert(at, ("dispatch", None))
            names.insert(at, "dispatch")
        if names and names[-1] == "dispatch":
            states.pop(), names.pop()
        if names:
            self.used.add("parser: optional headers")
        plan = {}
        lines = []
        all_states = [("start", ("h0", "t0_t"))] + list(zip(names, states))
        for i, (sname, (inst, typ)) in enumerate(all_states):
            later = names[i:]       # names[i] is the next state after all_states[i]
            ind = "        "
            body = []
            if sname == "dispatch":
                self.used.add("lookahead in select")
                lw = r.choice((8, 16))
                sel, spec = self.select([(f"pkt.lookahead<bit<{lw}>>()", lw, None)], later, ind)
                spec["lookahead"] = lw
                plan[sname] = {"extract": None, "select": spec}
                lines += [f"    state {sname} {{", *sel, "    }"]
                continue
            if inst == "s":
                self.used.add("header stack .next/.last")
                body.append(f"{ind}pkt.extract(hdr.s.next);")
                ref = "hdr.s.last"
                later = later + [sname]     # the next state first: every state is reachable
            else:
                body.append(f"{ind}pkt.extract(hdr.{inst});")
                ref = f"hdr.{inst}"
            widths = self.types[typ]
            if sname != "start" and r.random() < 0.25:
                self.used.add("verify")
                err = f"Bad{len(self.errors)}"
                self.errors.append(err)
                f = r.randrange(len(widths))
                v = r.getrandbits(widths[f])
                self.hints.setdefault(widths[f], set()).add(v)
                body.append(f"{ind}verify({ref}.f{f} != {widths[f]}w{v}, error.{err});")
            if not later:
                body.append(f"{ind}transition accept;")
                spec = None
            else:
                nk = 2 if len(widths) >= 2 and r.random() < 0.3 else 1
                idx = r.sample(range(len(widths)), nk)
                keys = [(f"{ref}.f{j}", widths[j], j) for j in idx]
                if nk == 1:
                    self.used.add("select on a field")
                sel, spec = self.select(keys, later, ind)
                body += sel
            plan[sname] = {"extract": widths, "select": spec}
            lines += [f"    state {sname} {{", *body, "    }"]
        return lines, plan

