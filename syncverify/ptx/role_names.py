"""Role names from the source: `producer_mainloop`, `consumer0`, not `w0`, `w4_7`.

Extraction groups warps into roles by what they execute; the kernel chose that by branches on the warp's
index. CUTLASS names its roles in those branches (`if (warp_group_role == WarpGroupRole::Producer)`, then
`if (producer_warp_role == ProducerWarpRole::Mainloop)`); a hand-written kernel says it in a comment
(`if (warp == 0) {  // producer`). A role is named after the branches that enclose the first statement of
its own, in the kernel's body:

* each statement's inline chain is read outermost first; the frames every statement shares (CUTLASS's
  `device_kernel` calling the kernel's `operator()`) are dropped, so the next frame is the kernel body's
  line: the call (`collective_mainloop.load(...)`) or statement that issued it;
* the role's own lines are the body lines not every role has (the set-up all warps run names nobody);
* for its first own line that stands under a naming branch, the enclosing `if`/`else if` lines are read
  outward by indentation; each branch on the warp (its condition names a warp, role, thread index or group)
  contributes the enumerators it compares with `==` (`Producer`, then `Mainloop`: `producer_mainloop`), or,
  when it compares none, the first word of the comment on its line.
  A branch that admits several (`Consumer0 || Consumer1`) names the roles under it in warp order when
  there are as many roles as alternatives (CUTLASS declares the enumerators in warpgroup order); otherwise
  it contributes what the alternatives share (`consumer`).

Names are unique (names that clash keep the role's warps: `consumers_w1`, `consumers_w2`) and stable (a
function of the source and the warps only). The outer levels of an inline chain are a reading too: PTX's
`.loc` gives one level, and the level above a call site is taken from the directive that last named that
position before it (nvcc emits the caller's line just before the callee's body). The source is the file the
`.file` entry names, found where the PTX was not built (under the installed CUTLASS package, beside the PTX)
and read only when it is verifiably the one compiled (source_files.py); a role whose source cannot be read
(no line info, no such file here, another version of it) keeps `wN`. It is a reading of the source's text for the
protocol's names and comments; nothing is decided from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .frames import frames
from .names import IDENT, RESERVED, SYNTHETIC
from .parse import Module
from .skeleton import Role
from .source_files import placed, source_lines

_OPENS = re.compile(r"^\s*(}\s*)?(else\s+if\b|if\b|else\b)")
_ENUM = re.compile(r"==\s*(?:\w+::)+(\w+)|(?:\w+::)+(\w+)\s*==")
_COMMENT_WORD = re.compile(r"//\s*([A-Za-z_]\w*)")
_CALL = re.compile(r"([A-Za-z_][\w.]*(?:->\w+)*)\s*\(")
_CONTINUED = 8  # the lines a branch's condition may run over
_KEYWORDS = frozenset({"if", "else", "while", "for", "switch", "return", "sizeof", "static_cast"})


@dataclass(frozen=True)
class RoleName:
    """A role's name from the source, and where it was read: the branch (its text, file, line) and the
    call or statement of the kernel's body it selects."""

    name: str
    branch: str
    file: str
    line: int
    call: str


def _indent(s: str) -> int:
    return len(s) - len(s.lstrip())


def _branch_text(lines: tuple[str, ...], n: int) -> str:
    """The condition of the branch opened at line n, continued over the lines until its `{`."""
    text = lines[n - 1]
    k = n
    while "{" not in text.split("//")[0] and k < len(lines) and k < n + _CONTINUED:
        text += " " + lines[k].strip()
        k += 1
    return text


def _enclosing(lines: tuple[str, ...], line: int) -> list[tuple[int, str]]:
    """The `if`/`else` lines enclosing `line`, innermost first (read by indentation)."""
    if not 0 < line <= len(lines):
        return []
    width = _indent(lines[line - 1])
    out = []
    for n in range(line - 1, 0, -1):
        text = lines[n - 1]
        if not text.strip() or text.lstrip().startswith(("#", "//")):
            continue
        if _indent(text) < width:
            width = _indent(text)
            if _OPENS.match(text):
                out.append((n, _branch_text(lines, n)))
            elif text.lstrip().startswith(")"):  # `) {` closing a condition written over several lines
                opener = _opener(lines, n, width)
                if opener:
                    out.append((opener, _branch_text(lines, opener)))
            if width == 0:
                break
    return out


def _opener(lines: tuple[str, ...], n: int, width: int) -> int:
    """The `if`/`else if (` line at indentation ``width`` whose condition the `)` at line n closes (CUTLASS's
    FMHA kernel: `else if (` with one alternative a line, then `) {`), within a few lines; 0 if none."""
    for k in range(n - 1, max(n - _CONTINUED, 0), -1):
        above = lines[k - 1]
        if above.strip() and _indent(above) < width:
            return 0
        if above.strip() and _indent(above) == width:
            return k if _OPENS.match(above) else 0
    return 0


def _snake(word: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", word).lower()


_SELECTS = re.compile(r"warp|role|threadIdx|group", re.I)


def _condition(lines: tuple[str, ...], n: int) -> str:
    """The condition a branch line tests: its own, or for a bare `else` that of the `if` it belongs to (the
    nearest line above at its indentation that opens an `if`)."""
    text = _branch_text(lines, n).split("//")[0]
    if re.match(r"^\s*(}\s*)?else\s*({|$)", text):
        for k in range(n - 1, 0, -1):
            above = lines[k - 1]
            if above.lstrip().startswith(("#", "//")):
                continue
            if above.strip() and _indent(above) == _indent(lines[n - 1]) and _OPENS.match(above) \
                    and "else" not in above.split("if")[0]:
                return _branch_text(lines, k).split("//")[0]
            if above.strip() and _indent(above) < _indent(lines[n - 1]):
                break
    return text


def _words(cond: str, tested: str | None = None) -> list[str]:
    """The enumerators a branch compares with `==`, or the first word of its comment -- for a branch on the
    warp (the condition it tests, `tested`, names a warp, a role, a thread index or a group):
    `params.mode == GemmUniversalMode::kGemm` selects no warp, and names none."""
    code, _, comment = cond.partition("//")
    if not _SELECTS.search(code if tested is None else tested):
        return []
    got = [_snake(a or b) for a, b in _ENUM.findall(code)]
    if got:
        return list(dict.fromkeys(got))
    m = _COMMENT_WORD.match("//" + comment) if comment else None
    return [_snake(m[1])] if m else []


def _shared(words: list[str]) -> str:
    """What alternatives share: `consumer` for `consumer0`, `consumer1`."""
    common = words[0]
    for w in words[1:]:
        while not w.startswith(common):
            common = common[:-1]
    common = common.rstrip("_0123456789")
    return common or "_or_".join(words)


_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:\s*,\s*function_name\s+\S+\s*,\s*inlined_at\s+(\d+)\s+(\d+)"
                  r"\s+(\d+))?")

Pos = tuple[int, int, int]


@dataclass(frozen=True)
class _Locs:
    """The module's `.loc` directives: the one in force at each PTX line (its PTX line, position, the position
    it was inlined at), and for each position the PTX lines that name it with their inlined-at."""

    in_force: tuple[tuple[int, Pos, Pos | None] | None, ...]
    by_pos: dict[Pos, tuple[tuple[int, Pos | None], ...]]


@lru_cache(maxsize=8)
def _in_force(text: str) -> _Locs:
    cur: tuple[int, Pos, Pos | None] | None = None
    force: list[tuple[int, Pos, Pos | None] | None] = [None]
    by_pos: dict[Pos, list[tuple[int, Pos | None]]] = {}
    for n, ln in enumerate(text.splitlines(), 1):
        force.append(cur)  # in force at line n: the directives above it
        m = _LOC.match(ln)
        if m and m[2] != "0":  # `.loc F 0 C` is "no line": the previous one stays
            pos = (int(m[1]), int(m[2]), int(m[3]))
            at = (int(m[4]), int(m[5]), int(m[6])) if m[4] else None
            cur = (n, pos, at)
            by_pos.setdefault(pos, []).append((n, at))
    return _Locs(tuple(force), {k: tuple(v) for k, v in by_pos.items()})


def _chain_at(ptx_line: int, mod: Module, locs: _Locs) -> list[tuple[str, int]]:
    """The instruction's whole inline chain, outermost first. A `.loc` names one level (`inlined_at` is the
    call site); the call site's own level is the `.loc` of that position last in force before, and so on up
    to a position of the kernel's own body. Empty without a `.loc`."""
    if not 0 < ptx_line < len(locs.in_force) or locs.in_force[ptx_line] is None:
        return []
    n, pos, at = locs.in_force[ptx_line]  # type: ignore[misc]
    out = [pos]
    while at is not None and len(out) < 64:
        out.append(at)
        before = [(m, up) for m, up in locs.by_pos.get(at, ()) if m < n]
        if not before:
            break
        n, at = before[-1]
    return [(mod.files.get(f, f"file{f}"), line) for f, line, _c in reversed(out)]


def _body_sites(roles: tuple[Role, ...], mod: Module) -> dict[str, list[tuple[str, int]]]:
    """Each role's statements as the kernel body's lines (file, line), in order."""
    chains: dict[str, list[list[tuple[str, int]]]] = {}
    index = _in_force(mod.text)
    for r in roles:
        got = []
        for body in r.per_cta:
            for s in body:
                chain = _chain_at(s.instr.line, mod, index) or [(f.file, f.line)
                                                                 for f in reversed(frames(s.instr, mod))]
                if chain:
                    got.append(chain)
        chains[r.name] = got
    every = [c for cs in chains.values() for c in cs]
    depth = 0
    while every and all(len(c) > depth + 1 and c[depth] == every[0][depth] for c in every):
        depth += 1
    return {name: [c[depth] for c in cs if len(c) > depth] for name, cs in chains.items()}


def role_names(roles: tuple[Role, ...], mod: Module) -> dict[str, RoleName]:
    """Role name (`w0`) -> its name from the source, for the roles whose branch is found."""
    if len(roles) < 2:
        return {}
    sites = _body_sites(roles, mod)
    counts: dict[tuple[str, int], int] = {}
    for ss in sites.values():
        for site in set(ss):
            counts[site] = counts.get(site, 0) + 1
    found: dict[str, tuple[list[tuple[int, list[str]]], str, int, str, str]] = {}
    for r in roles:
        for file, line in dict.fromkeys(s for s in sites[r.name] if counts[s] < len(roles)):
            lines = source_lines(mod, file)
            if lines is None or not placed(mod, file, line, lines):
                continue
            branches = [(n, _words(text, _condition(lines, n))) for n, text in reversed(_enclosing(lines, line))]
            branches = [(n, w) for n, w in branches if w]
            if branches:
                inner = branches[-1][0]
                call = next((m[1] for m in _CALL.finditer(lines[line - 1]) if m[1] not in _KEYWORDS), "")
                found[r.name] = (branches, file, inner, _branch_text(lines, inner).split("//")[0].strip(), call)
                break
    # alternatives: the roles under one branch of several enumerators, in warp order
    under: dict[tuple[str, int], list[Role]] = {}
    for r in roles:
        if r.name in found:
            for n, w in found[r.name][0]:
                if len(w) > 1:
                    under.setdefault((found[r.name][1], n), []).append(r)
    out: dict[str, RoleName] = {}
    for r in roles:
        if r.name not in found:
            continue
        branches, file, inner, text, call = found[r.name]
        parts = []
        for n, w in branches:
            if len(w) == 1:
                parts.append(w[0])
                continue
            group = sorted({x.first_warp: x for x in under[(file, n)]}.values(), key=lambda x: x.first_warp)
            parts.append(w[group.index(r)] if len(group) == len(w) else _shared(w))
        name = "_".join(dict.fromkeys(p for p in parts if p))
        out[r.name] = RoleName(name, text, file, inner, call)
    return _unique(out, roles)


def _unique(named: dict[str, RoleName], roles: tuple[Role, ...]) -> dict[str, RoleName]:
    """Clashing names keep their warps (`consumer_w4`); a name that is not an identifier, a word of the
    language or a synthetic name is dropped (the role keeps `wN`)."""
    taken = {r.name for r in roles if r.name not in named}
    by_name: dict[str, list[str]] = {}
    for old, rn in named.items():
        by_name.setdefault(rn.name, []).append(old)
    out = {}
    for old, rn in named.items():
        name = rn.name if len(by_name[rn.name]) == 1 else f"{rn.name}_{old}"
        if not IDENT.match(name) or name in RESERVED or SYNTHETIC.match(name) or name in taken:
            continue
        taken.add(name)
        out[old] = RoleName(name, rn.branch, rn.file, rn.line, rn.call)
    return out
