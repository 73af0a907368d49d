"""The tables of :mod:`hina.testing.p4smith`: keys (``exact``, ``lpm`` on whole bytes,
``ternary``, ``isValid()``), ``const entries`` or ``entries`` with priorities, actions with
parameters, default actions with or without arguments, and the ways a table is applied
(plainly, for ``.hit``/``.miss``, in ``switch (t.apply().action_run)``)."""
from __future__ import annotations


class TableGen:
    """Table generation for :class:`hina.testing.p4smith._Gen`, which holds the random
    generator, the scope, expressions and statements, the features used, the value hints and
    the field widths and operators to draw from (``WIDTHS``, ``BINARY_OPS``)."""

    def key_value(self, kind: str, w: int) -> tuple[str, tuple]:
        """One key's text in an entry and its normalised (value, mask)."""
        r = self.rng
        if kind == "bool":
            v = r.random() < 0.5
            return ("true" if v else "false"), (v,)
        full = (1 << w) - 1
        v = r.choice([0, 1, full, 1 << (w - 1), r.getrandbits(w), r.getrandbits(w)])
        if kind == "exact":
            self.hints.setdefault(w, set()).add(v)
            return f"{w}w{v}", (v, full)
        if kind == "lpm":
            plen = r.randint(0, w)
            mask = (full << (w - plen)) & full
        else:
            if r.random() < 0.15:
                self.used.add("const entries _")
                return "_", (0, 0)
            mask = r.choice([full, r.getrandbits(w), full ^ 0xF, 0xF0]) & full
        v &= mask
        self.hints.setdefault(w, set()).add(v)
        return f"{w}w{v} &&& {w}w{mask}", (v, mask)

    def table(self, n: int, valid_keys: list) -> tuple[list, list]:
        """A table: one or two keys (exact, lpm, ternary, isValid()), two or three actions,
        const entries or entries with priorities, a default action (with arguments)."""
        r = self.rng
        self.set_scope()
        cand = [lv for lv in self.scope]
        keys = []
        for _ in range(r.choice((1, 1, 2))):
            if valid_keys and r.random() < 0.2 and not any(k[2] == "bool" for k in keys):
                inst = r.choice(valid_keys)
                keys.append((f"hdr.{inst}.isValid()", 1, "bool"))
                self.used.add("isValid() key")
                continue
            text, w = r.choice(cand)
            # lpm on a whole number of bytes only: p4c-bm2-ss writes a const entry's prefix
            # length of a bit<13> key as is, and BMv2 counts it from the top of the key's two
            # bytes (programs/table_lpm_const_odd_width, xfail on BMv2)
            kinds = ["exact", "ternary"] + ([] if any(k[2] == "lpm" for k in keys) or w % 8
                                            else ["lpm"])
            kind = r.choice(kinds)
            keys.append((text, w, kind))
            self.used.add(f"{kind} key")
        if len(keys) == 2:
            self.used.add("two keys")
        ta, wa = r.choice(self.lvals)
        wb = r.choice(self.WIDTHS)
        self.set_scope(extra=(("v", wa), ("u", wb)))
        decls = [f"    action set_{n}(bit<{wa}> v, bit<{wb}> u) {{ {ta} = v {r.choice(self.BINARY_OPS)} "
                 f"{self.expr(wa, 1)}; {self.assign('').strip()} }}"]
        self.set_scope()
        other = self.assign('').strip()
        if r.random() < 0.15:
            self.used.add("exit in a table's action")
            other += " exit;"
        decls.append(f"    action other_{n}() {{ {other} }}")
        acts = [f"set_{n}", f"other_{n}"]
        if r.random() < 0.3:
            decls.append(f"    action drop_{n}() {{ mark_to_drop(std); }}")
            acts.append(f"drop_{n}")
            self.used.add("mark_to_drop")
        decls += [f"    table t{n} {{",
                  "        key = { " + " ".join(f"{t}: {'exact' if k == 'bool' else k};"
                                                for t, _, k in keys) + " }",
                  f"        actions = {{ {'; '.join(acts)}; NoAction; }}"]
        priority = any(k[2] == "ternary" for k in keys) and r.random() < 0.4
        self.used.add("entries with priority" if priority else "const entries")
        decls.append("        entries = {" if priority else "        const entries = {")
        seen, prios = set(), r.sample(range(1, 50), 6)
        for i in range(r.randint(1, 5)):
            texts, norm = zip(*(self.key_value(k, w) for _, w, k in keys))
            if norm in seen:
                continue
            seen.add(norm)
            call = self.action_call(n, acts, wa, wb)
            key = texts[0] if len(texts) == 1 else "(" + ", ".join(texts) + ")"
            decls.append(f"            {f'priority={prios[i]}: ' if priority else ''}{key}: {call};")
        default = self.action_call(n, acts + ["NoAction"], wa, wb)
        if default.startswith("set_"):
            self.used.add("default action with arguments")
        self.used.add("default action")
        decls += ["        }", f"        default_action = {default};", "    }"]
        return decls, acts

    def action_call(self, n, acts, wa, wb) -> str:
        a = self.rng.choice(acts)
        if a.startswith("set_"):
            self.used.add("action parameter")
            return f"{a}({self.rng.getrandbits(wa)}, {self.rng.getrandbits(wb)})"
        return f"{a}()"

    def apply_table(self, n: int, acts: list, valid: frozenset, local: tuple) -> tuple[list, frozenset]:
        r = self.rng
        k = r.random()
        ind = "        "
        if k < 0.4:
            return [f"{ind}t{n}.apply();"], valid
        if k < 0.7:
            which = r.choice(("hit", "miss"))
            self.used.add(f"apply().{which}")
            out = [f"{ind}if (t{n}.apply().{which}) {{"]
            a, va = self.stmts(ind + "    ", r.randint(1, 2), 1, valid, local)
            out += a
            vb = valid
            if r.random() < 0.5:
                out.append(f"{ind}}} else {{")
                b, vb = self.stmts(ind + "    ", r.randint(1, 2), 1, valid, local)
                out += b
            return out + [f"{ind}}}"], va & vb
        self.used.add("switch (apply().action_run)")
        out = [f"{ind}switch (t{n}.apply().action_run) {{"]
        after = valid
        labels = r.sample(acts + ["NoAction"], r.randint(1, min(3, len(acts) + 1)))
        if r.random() < 0.5:
            labels.append("default")
        for label in labels:
            out.append(f"{ind}    {label}: {{")
            a, va = self.stmts(ind + "        ", r.randint(0, 2), 1, valid, local)
            out += a + [f"{ind}    }}"]
            after = after & va
        return out + [f"{ind}}}"], after
