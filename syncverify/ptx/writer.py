"""The `.sync` text of an extracted skeleton: a protocol a kernel engineer can review and keep.

Every statement carries the CUDA source line (from `.loc`) and the PTX line it
came from as a comment; `line_map` records, for each line of the text, the
instruction behind it so that findings on the text can be reported at the
CUDA source line.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from . import storage
from .clc import CHOOSE
from .launch import ParamBytes
from .parse import Instr, Module
from .role_names import role_names
from .roll import Loop, roll
from .selectors import selectors
from .skeleton import Skeleton, Stmt


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("../..") else os.path.basename(path)


def _short_file(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def where(ins: Instr) -> str:
    s = ins.src
    out = f"ptx:{ins.line}"
    if s is not None:
        src = f"{_short(s.file)}:{s.line}"
        if s.inlined_at:
            f, ln, _c = s.inlined_at[0]
            src += f" (inlined at {_short(f)}:{ln})"
        out = f"{src}, {out}"
    return out


def render(sk: Skeleton, ptx_path: str, expect: str | None = None,
           module: Module | None = None) -> tuple[str, dict[int, Instr]]:
    """The protocol text, and for each of its lines (1-based) the instruction it came from; with the
    `module`, each role's comment says the source branch that selects it (selectors.py)."""
    lines: list[str] = []
    origin: dict[int, Instr] = {}
    if expect:
        lines.append(f"// expect: {expect}")
    la = sk.launch
    lines += [
        f"// Extracted by `syncverify extract` from {_short(ptx_path)}, kernel {sk.kernel}.",
        f"// Launch: block {la.block[0]}x{la.block[1]}x{la.block[2]}, cluster "
        f"{la.cluster[0]}x{la.cluster[1]}x{la.cluster[2]}"
        + (f", cluster index {la.cluster_index}" if la.cluster_index else "")
        + (f"; parameters {', '.join(f'{k}={_show(v)}' for k, v in la.params.items())}" if la.params else "")
        + (f"; tensor-map boxes {', '.join(f'{p}[{o}]={n}' for (p, o), n in la.tensor_bytes.items())}"
           if la.tensor_bytes else "")
        + ".",
        "// Loops ran to completion at this launch; repeated statements are written as loops with the trip",
        "// counts of this launch: the protocol is the kernel at these values only.",
    ]
    for n in sk.notes:
        lines.append(f"// note: {n}")
    lines.append(f"protocol {_ident(sk.kernel)} {{")
    if la.ctas > 1:
        lines.append(f"  cluster {la.ctas};")
    lines.append(f"  cta threads {la.threads};")
    lines += sk.grid_decls
    chosen = selectors(sk.roles, module) if module is not None else {}
    named = role_names(sk.roles, module) if module is not None else {}
    objects = {n for n, *_ in sk.mbarriers} | {n for n, *_ in sk.slots} | {n for n, *_ in sk.tmem} \
        | {n for n, _a in sk.tmaps}
    named = {old: rn for old, rn in named.items() if rn.name not in objects}  # one namespace: objects keep theirs
    for old, rn in named.items():  # the branch the name was read from is the one shown
        chosen[old] = f"`{rn.branch}` ({_short_file(rn.file)}:{rn.line})" + (f", calling `{rn.call}(…)`"
                                                                              if rn.call else "")
    sk = replace(sk, roles=tuple(replace(r, name=named[r.name].name) if r.name in named else r for r in sk.roles))
    chosen = {(named[k].name if k in named else k): v for k, v in chosen.items()}
    for r in sk.roles:
        decl = f"warp {r.first_warp}" if r.count == 1 else f"warp {r.first_warp} + i"
        arr = "" if r.count == 1 else f"[{r.count}]"
        span = f"warp {r.first_warp}" if r.count == 1 else f"warps {r.first_warp}..{r.first_warp + r.count - 1}"
        lines.append(f"  role {r.name}{arr} = {decl};".ljust(40) + f"// {span}: threads {32 * r.first_warp}.."
                     f"{32 * (r.first_warp + r.count) - 1}"
                     + (f", under {chosen[r.name]}" if r.name in chosen else ""))
    placed = {name: (ref, off) for name, ref, off in sk.mb_storage}
    member = {name: f"SharedStorage::{path}, " for name, path in sk.origins}
    for name, start, n in sk.mbarriers:
        if name in placed:
            continue  # declared after the buffer whose bytes it shares
        arr = f"[{n}]" if n > 1 else ""
        lines.append(f"  mbarrier {name}{arr};".ljust(40) + f"// {member.get(name, '')}shared memory "
                     f"{start:#x}..{start + 8 * n - 1:#x}")
    for name, n, size, start, pieces in sk.slots:
        arr = f"[{n}]" if n > 1 else ""
        decl = (size + 15) // 16 * 16
        where_ = (f"shared memory {start:#x}..{start + n * size - 1:#x}" if pieces == 1
                  else f"{size} bytes of shared memory in {pieces} pieces from {start:#x}")
        lines.append(f"  smem {name}{arr} bytes {decl};".ljust(40) + f"// {member.get(name, '')}{where_}"
                     + (f" ({size} bytes each)" if decl != size else ""))
    for name, start, n in sk.mbarriers:
        if name in placed:
            arr = f"[{n}]" if n > 1 else ""
            lines.append(f"  mbarrier {name}{arr}{storage.declaration(*placed[name])};".ljust(40)
                         + f"// shared memory {start:#x}..{start + 8 * n - 1:#x}: data before its init, after "
                         "its inval")
    for name, n, width, first in sk.tmem:
        arr = f"[{n}]" if n > 1 else ""
        lines.append(f"  tmem {name}{arr} cols {width};".ljust(40) + f"// tensor-memory columns {first}.."
                     f"{first + n * width - 1} of the allocation")
    for name, addr in sk.tmaps:
        lines.append(f"  tensormap {name};".ljust(40) + f"// the tensor map at global address {addr:#x}, rewritten")
    for name in sk.regs:
        lines.append(f"  regs {name};".ljust(40) + "// the A-fragment registers of an RS-form wgmma.mma_async")
    for r in sk.roles:
        bodies = r.per_cta
        if all(_texts(b) == _texts(bodies[0]) for b in bodies):
            groups = [(None, bodies[0])]
        else:
            groups = [(rank, b) for rank, b in enumerate(bodies) if b]
        for rank, body in groups:
            lines.append("")
            who = "block" if sk.grid_decls else "cta"  # a grid's CTAs are told apart by their index in it
            guard = r.name if rank is None else f"{r.name} && {who} == {rank}"
            lines.append(f"  if {guard} {{")
            first = len(lines)
            _body(lines, origin, body)
            lines[first:] = _blocks(lines[first:])
            lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n", origin


_LET = re.compile(r"\blet (tok|v\d+) = ")
_USE = re.compile(r"\bif (!?)(tok) \{")
_KEPT = re.compile(r"\bv\d+\b")  # a value read from a flag (ptx/kept.py): `vL`, L the line of its read


def _blocks(lines: list[str]) -> list[str]:
    """A role body's lines with the blocks of probes (ptx/probe.py) indented, and each token let under a
    name of its own, its uses under that name (a value read from a flag, `vL` of ptx/kept.py, alike):
    extraction names every token `tok`, alike in every
    iteration so that loops roll, and the language lets no name be declared twice in a scope
    (docs/language.md §5.1)."""
    out: list[str] = []
    opened: list[bool] = []  # the blocks open at this line: True for a probe's
    count: dict[str, int] = {}
    name: dict[str, str] = {}
    for line in lines:
        code = line.split("//")[0].strip()
        kind = False
        if code.startswith("}") and opened:
            kind = opened.pop()
        code_part = line.split("//")[0]
        if _KEPT.search(code_part):  # each use of a kept value under the name of the `let` before it
            at = _LET.search(code_part)
            lo = at.end() if at else 0
            code_part = code_part[:lo] + _KEPT.sub(lambda k: name.get(k.group(0), k.group(0)), code_part[lo:])
            line = code_part + line[len(line.split("//")[0]):]
        m = _LET.search(line)
        if m:
            n = count[m.group(1)] = count.get(m.group(1), 0) + 1
            name[m.group(1)] = m.group(1) if n == 1 else f"{m.group(1)}_{n}"
            line = line[:m.start(1)] + name[m.group(1)] + line[m.end(1):]
        u = _USE.search(line)
        if u and u.group(2) in name:
            line = line[:u.start(2)] + name[u.group(2)] + line[u.end(2):]
        out.append("  " * sum(opened) + line)
        if code.endswith("{"):
            opened.append(kind if code.startswith("}") else code.startswith(_PROBE_OPEN))
    return out


# and the blocks of a count of CLC responses (clc.py), indented alike
_PROBE_OPEN = ("if try_wait", "if !try_wait", "if test_wait", "if !test_wait", "if tok", "if !tok", f"if {CHOOSE} ",
               "if v", "if !(v")  # and a branch on a value read from a flag (ptx/kept.py)


def _texts(body: tuple[Stmt, ...]) -> list[tuple[str, bool, tuple[int, ...]]]:
    return [(s.text, s.elect, s.only) for s in body]


def _body(lines: list[str], origin: dict[int, Instr], body: tuple[Stmt, ...]) -> None:
    _items(lines, origin, roll(body, []), "    ")


def _items(lines: list[str], origin: dict[int, Instr], items: list[Stmt | Loop], pad: str) -> None:
    i = 0
    while i < len(items):
        it = items[i]
        if isinstance(it, Loop):
            lines.append(f"{pad}for {it.var} in 0..{it.count} {{")
            _runs(lines, origin, list(it.body), pad + "  ")
            lines.append(f"{pad}}}")
            i += 1
            continue
        j = i
        while j < len(items) and isinstance(items[j], Stmt):
            j += 1
        _runs(lines, origin, [(s.text, s, 1) for s in items[i:j]], pad)  # type: ignore[union-attr]
        i = j


def _runs(lines: list[str], origin: dict[int, Instr], stmts: list[tuple[str, Stmt, int]], pad: str) -> None:
    """Statements in order, those of one lane (`elect`) and those of some instances of a merged warpgroup
    role (`if instance == k`) grouped into blocks."""
    j = 0
    while j < len(stmts):
        s = stmts[j][1]
        k = j
        while k < len(stmts) and (stmts[k][1].elect, stmts[k][1].only) == (s.elect, s.only):
            k += 1
        inner = pad
        if s.only:
            lines.append(f"{pad}if {' || '.join(f'instance == {n}' for n in s.only)} {{")
            inner += "  "
        if s.elect:
            lines.append(f"{inner}elect {{")
        for text, st, copies in stmts[j:k]:
            _line(lines, origin, inner + ("  " if s.elect else ""), text, st, copies)
        if s.elect:
            lines.append(f"{inner}}}")
        if s.only:
            lines.append(f"{pad}}}")
        j = k


def _line(lines: list[str], origin: dict[int, Instr], pad: str, text: str, s: Stmt, copies: int = 1) -> None:
    more = f" (+{copies - 1} unrolled cop{'y' if copies == 2 else 'ies'})" if copies > 1 else ""
    retry = f"; retried at {where(s.retry)}" if s.retry is not None else ""
    lines.append(f"{pad}{text}".ljust(47) + f" // {where(s.instr)}{more}{retry}")
    origin[len(lines)] = s.instr


def _ident(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else f"k_{out}"


def _show(v: int | bytes | ParamBytes) -> str:
    if isinstance(v, ParamBytes):
        return v.show()
    return f"<{len(v)} bytes>" if isinstance(v, bytes) else str(v)
