"""Writing repeated statements back as a `for` loop, for the reader.

Extraction runs loops to completion, so a pipeline of ITERS iterations comes out
as ITERS copies of its body. Where a run of statements repeats — the same PTX
instructions, the same text except for array indices and parities — it is
written as `for kN in 0..R { … }` with each varying number given by a formula
in the loop variable (`k0 % 2`, `2 + k0 % 2`, `(k0 / 2 + 1) % 2`). A formula is
used only when it reproduces every iteration's number exactly, and the whole
loop is expanded again and compared with the statements it replaces, so the
loop means exactly the statements extracted. The bound is the trip count at
this launch, a constant: the loop says nothing about other trip counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import budget
from .skeleton import Stmt

# numbers that may vary between iterations: array indices and parities
_VAR = re.compile(r"(\[\d+\])|(parity \d+)")
MIN_REPEAT = 2
MAX_DIVISOR = 16  # stage counts and rounds: k % STAGES, (k / STAGES + 1) % 2
_FORM = re.compile(r"^(?:(-?\d+) \+ )?\(?k\d+(?: / (\d+))?(?: \+ (\d+))?\)?(?: % (\d+))?$")


@dataclass(frozen=True)
class Loop:
    var: str
    count: int
    body: tuple[tuple[str, Stmt, int], ...]  # (text with formulas, first iteration's statement, PTX copies)


def _template(s: Stmt) -> tuple[str, tuple[bool, tuple[int, ...]], object, tuple[int, ...]]:
    """Text with the varying numbers taken out, elect, the CUDA source position, and the numbers.

    The source position rather than the PTX line: a loop nvcc unrolled has one
    PTX copy of the statement per unrolled iteration, all from one CUDA line.
    """
    nums = tuple(int(re.sub(r"\D", "", m.group(0))) for m in _VAR.finditer(s.text))
    where = (s.instr.src.file, s.instr.src.line, s.instr.src.inlined_at) if s.instr.src else s.instr.line
    return (_VAR.sub(lambda m: "[#]" if m.group(1) else "parity #", s.text), (s.elect, s.only), where, nums)


def _formulas(var: str, seq: list[int], parity: bool = False) -> str | None:
    """The simplest formula in `var` giving seq[k] for k = 0, 1, …; None when none of the forms fits.

    For a parity the `… % 2` forms come first: `(k / 2) % 2` says what the
    kernel computes, where `k / 2` only agrees with it at this trip count.
    """
    n = len(seq)
    if all(v == seq[0] for v in seq):
        return str(seq[0])
    ks = range(n)
    cands: list[tuple[int, str, list[int]]] = []
    for d in range(1, min(n, MAX_DIVISOR) + 1):
        q = var if d == 1 else f"{var} / {d}"
        for m in range(2, min(n, MAX_DIVISOR) + 1):
            for b in range(m):
                inner = q if b == 0 else f"{q} + {b}"
                core = f"{inner} % {m}" if b == 0 and d == 1 else f"({inner}) % {m}"
                vals = [((k // d) + b) % m for k in ks]
                c = seq[0] - vals[0]
                cands.append((len(core), (f"{c} + " if c else "") + core, [v + c for v in vals]))
        vals = [k // d for k in ks]
        c = seq[0] - vals[0]
        cands.append((len(q), (f"{c} + " if c else "") + q, [v + c for v in vals]))
    for _n, text, vals in sorted(cands, key=lambda t: (parity and not t[1].endswith("% 2"), t[0], t[1])):
        if vals == seq:
            return text
    return None


def _evaluate(formula: str, k: int) -> int:
    """The value of a formula `_formulas` wrote, read back from its text (C's / and % on k >= 0)."""
    if re.fullmatch(r"-?\d+", formula):
        return int(formula)
    m = _FORM.match(formula)
    if m is None:
        raise ValueError(formula)
    c, d, b, mod = (int(x) if x else None for x in m.groups())
    v = k // (d or 1) + (b or 0)
    if mod is not None:
        v %= mod
    return v + (c or 0)


def _fill(template: str, values: list[str]) -> str:
    it = iter(values)
    return re.sub(r"\[#\]|parity #", lambda m: f"[{next(it)}]" if m.group(0) == "[#]" else f"parity {next(it)}",
                  template)


def _try_loop(body: list[Stmt], i: int, p: int, r: int, var: str) -> Loop | None:
    blocks = [body[i + j * p: i + (j + 1) * p] for j in range(r)]
    out: list[tuple[str, Stmt, int]] = []
    for pos in range(p):
        tmpl = _template(blocks[0][pos])
        nums = [_template(b[pos])[3] for b in blocks]
        forms = []
        kinds = [m.group(2) is not None for m in _VAR.finditer(blocks[0][pos].text)]
        for f in range(len(tmpl[3])):
            form = _formulas(var, [n[f] for n in nums], parity=kinds[f])
            if form is None:
                return None
            forms.append(form)
        text = _fill(tmpl[0], forms)
        # check by expansion: the loop must mean exactly the statements it replaces
        for j, b in enumerate(blocks):
            if _fill(tmpl[0], [str(_evaluate(f, j)) for f in forms]) != b[pos].text:
                return None
        out.append((text, blocks[0][pos], len({b[pos].instr.line for b in blocks})))
    return Loop(var, r, tuple(out))


_LET = re.compile(r"^let (\w+) = ")
_USE = re.compile(r"^if !?(\w+) \{$")


def closed(stmts: list[Stmt]) -> bool:
    """Whether the statements are whole blocks: every `{` a probe's `if` opens (ptx/probe.py) is closed
    among them and none closes an outer one, and every token they test (`if !T {`) is let among them
    first. Only such a run can be a loop's body or be cut around by one."""
    depth = 0
    let: set[str] = set()
    used: set[str] = set()
    for s in stmts:
        m = _LET.match(s.text)
        if m:
            let.add(m.group(1))
        u = _USE.match(s.text)
        if u and u.group(1) not in ("try_wait", "test_wait"):
            if u.group(1) not in let:
                return False
            used.add(u.group(1))
        if s.text.startswith("}"):
            depth -= 1
            if depth < 0:
                return False
        if s.text.endswith("{"):
            depth += 1
    return depth == 0 and let <= used


def roll(body: tuple[Stmt, ...], names: list[str]) -> list[Stmt | Loop]:
    """The statements with the longest repeated run written as a loop (then its prefix and suffix).

    The run is searched over every start and period, its statements compared by a small integer
    per template; a start or period that cannot beat the best run found (fewer statements left
    than it covers) is not tried. The search is quadratic at worst, so it looks at the clock of
    the check (budget.check_clock)."""
    items = list(body)
    ids: dict[object, int] = {}
    keys = [ids.setdefault(_template(s)[:3], len(ids)) for s in items]
    n = len(items)
    best: tuple[int, int, int] | None = None  # start, period, repeats
    covered = 0
    for i in range(n):
        if n - i <= covered:
            break  # no run from here on can cover more
        budget.check_clock(f"writing the extracted statements as loops ({n} statements)")
        for p in range(1, (n - i) // 2 + 1):
            if (n - i) // p * p <= covered:
                continue
            r = 1
            while i + (r + 1) * p <= n and keys[i + r * p: i + (r + 1) * p] == keys[i: i + p]:
                r += 1
            if r >= MIN_REPEAT and p * r > covered and closed(items[i: i + p]):
                best, covered = (i, p, r), p * r
    if best is None:
        return list(items)
    i, p, r = best
    var = f"k{len(names)}"
    loop = _try_loop(items, i, p, r, var)
    if loop is None:
        return list(items)
    names.append(var)
    return [*roll(tuple(items[:i]), names), loop, *roll(tuple(items[i + p * r:]), names)]
