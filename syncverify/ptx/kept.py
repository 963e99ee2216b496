"""A value read from a flag that decides a branch, read from PTX (whole-grid extraction): `let v = atom…`.

CUDA's threadFenceReduction sample (NVIDIA/cuda-samples, Samples/2_Concepts_and_Techniques/
threadFenceReduction/threadFenceReduction_kernel.cuh, `reduceSinglePass`) and every "last CTA to arrive
reduces" kernel do this: thread 0 takes a ticket with `atomicInc` on a counter in global memory, stores
`ticket == gridDim.x - 1` into a `__shared__` flag, `__syncthreads()`, and every thread branches on the flag.
The language says it (docs/language.md §3.7, semantics/families/flag_values.py): `let v = atom.inc F, N;`,
`st.relaxed.cta S[block], v == N - 1 ? 1 : 0;`, `syncthreads;`, `let w = ld.relaxed.cta S[block];`,
`if w != 0 { … }`. Here each instruction becomes that:

* the `atom` whose old value some instruction reads is `let vL = atom…` (gridsync.py; L its PTX line), and its
  register holds the kept value `vL` (kept_values.py);
* `setp` of a kept value with a known value, `selp` of known values on a kept predicate, `mov` and `cvt` of a
  kept value compute the expression (`vL == 1`, `vL == 1 ? 1 : 0`); a conversion or a store narrower than 32
  bits is taken only of a value that is 0 or 1 (a wider one could be truncated);
* a store of a kept value to a `__shared__` word by one thread is the per-CTA flag of that word,
  `st.relaxed.cta S[c], E;`, *and* the ordinary shared-memory write it is (the slot's race rules apply as to
  any write: a read of the word that no barrier orders after the store is SV301, so the flag's strong access
  never hides a race of the weak one); a load of the word is `let vL = ld.relaxed.cta S[c];` and the ordinary
  read. Where no race is reported the load is ordered after the store by the CTA's synchronization, so it reads
  the latest store (the flag family's views agree: a load kept by a warp is refused where its lanes could read
  different writes);
* a branch on a kept predicate is `if E { … } else { … }`: the warp is copied, the predicate set true in one
  copy and false in the other, each runs to the branch's immediate post-dominator, and the registers join
  there (probe.py's `_merge`: a value the outcomes disagree on is unknown from there on).

Anything else a kept value reaches is refused at its line: arithmetic other than the above, an address, a
guard of an instruction that is not a branch, a value stored to global memory or to a flag, a `shfl`/`vote`
that hands it to other lanes (the language keeps one value per process and gives it to no other lane), a
branch whose paths do not join, a loop whose exit it decides (a spin: `wait.until` takes one load and a
comparison only, gridsync.py), lanes that do not all hold the same value, a branch some lanes of the warp
take only. kept_words.py checks, over every warp of the CTA, that the `__shared__` word is written only by such
stores (another write of its bytes, which the flag would miss, is refused there) and that each load whose value
is used follows a store of it (else it could read the word uninitialized).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .access import element_bytes, shared_target, space_of
from .cfg import EXIT
from .kept_values import Kept, result_read, with_entry
from .launch import Event, lanes_of
from .parse import Instr, Name, NegName, Pair, operand_registers
from .probe import _merge, clone
from .values import UNKNOWN, signed, width
from .warp import WarpState, _Entry

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_NESTED = 16  # branches on kept values nested in each other's outcomes
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
        "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
_SWAP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEG = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_SOURCES_ALL = ("st", "red", "bra", "bar", "barrier", "mbarrier", "cp", "prefetch", "fence", "membar")


def sources(ins: Instr) -> set[str]:
    """The registers an instruction reads (its operands but the destination; an address's base)."""
    ops = ins.operands
    srcs = ops if ins.base in _SOURCES_ALL else ops[1:]
    out: set[str] = set()
    for o in srcs:
        out |= operand_registers(o)
    if ins.base not in _SOURCES_ALL and ops and not isinstance(ops[0], Name | Pair | NegName):
        out |= operand_registers(ops[0])  # a vector or address destination's registers are read
    return out


def _uniform(run: WarpState, ins: Instr, name: str, lanes: int, what: str) -> Kept:
    """The one kept value register ``name`` holds in every executing lane (refused otherwise)."""
    got = run.kept.get(name, {})
    vals = {got.get(lane) for lane in lanes_of(lanes)}
    if None in vals:
        first = next(iter(k for k in vals if k is not None))
        raise run.refuse(ins, f"the value read by `{first.opcode}` at PTX line {first.line} reaches {what} in some "
                         "of the lanes that execute it only; a value read from a flag is kept by one thread, or "
                         "by a warp that loads it from a __shared__ word after a barrier")
    if len(vals) != 1:
        raise run.refuse(ins, f"the lanes that execute {what} hold different values read from flags")
    k = vals.pop()
    assert k is not None
    return k


def _known(run: WarpState, ins: Instr, op: object, lanes: int) -> int:
    vals = {run.read(op, lane) for lane in lanes_of(lanes)}  # type: ignore[arg-type]
    if UNKNOWN in vals or len(vals) != 1:
        raise run.refuse(ins, f"`{ins.opcode}` computes with a value read from a flag and a value that is not "
                         "known (or differs between lanes); the language's expressions take constants and values "
                         "the launch fixes")
    return int(vals.pop())  # type: ignore[arg-type]


def _const(v: int, t: str) -> int:
    """A constant operand as the comparison of type ``t`` reads it (a kept value is never negative: a flag's
    values lie in 0..bound, docs/language.md §3.7)."""
    bits = width(t)
    return signed(v, bits) if t.startswith("s") else v & ((1 << bits) - 1)


def _refuse_use(run: WarpState, ins: Instr, k: Kept) -> None:
    how = ("hands it to other lanes, which the language cannot say: a value read from a flag is kept by "
           "one process and reaches the other threads of the CTA only through a __shared__ word written by one "
           "thread and read after a barrier") if ins.base in ("shfl", "vote", "match", "redux") else (
           "is not one of the computations extraction writes as the language's expression (a comparison "
           "with a known value, a `selp` of known values, `mov`, `cvt`, a store to a __shared__ word)")
    raise run.refuse(ins, f"`{ins.opcode}` reads the value `{k.opcode}` read from a flag at PTX line {k.line} "
                     f"(kept as `{k.expr}`) and {how}")


def execute(run: WarpState, ins: Instr, lanes: int, plain: Callable[[Instr, int], None]) -> None:
    """Execute ``ins`` for ``lanes`` where kept values may be involved; ``plain`` executes it as usual."""
    if not run.kept and not run.mem.kept_words:
        plain(ins, lanes)  # no kept value anywhere yet (every kernel until an atomic's result is read)
        return
    used = [r for r in sorted(sources(ins)) if r in run.kept and any(lane in run.kept[r] for lane in lanes_of(lanes))]
    if not used:
        word = _kept_load(run, ins, lanes)
        plain(ins, lanes)
        if word is not None:
            _off, boolean = word
            k = Kept(f"v{ins.line}", boolean, ins.line, ins.opcode)
            dst = ins.operands[0]
            if isinstance(dst, Name):
                run.kept = with_entry(run.kept, dst.name, lanes_of(lanes), k)
        return
    base, ops, mods = ins.base, ins.operands, ins.mods
    first = run.kept[used[0]][next(lane for lane in lanes_of(lanes) if lane in run.kept[used[0]])]
    if base == "setp" and len(ops) == 3 and len(used) == 1:
        _setp(run, ins, lanes, used[0])
    elif base == "selp" and len(ops) == 4 and used == sorted(operand_registers(ops[3])):
        p = _uniform(run, ins, used[0], lanes, f"`{ins.opcode}`")
        a, b = _known(run, ins, ops[1], lanes), _known(run, ins, ops[2], lanes)
        t = mods[-1]
        a, b = _const(a, t), _const(b, t)
        if not (0 <= a < 1 << 31 and 0 <= b < 1 << 31):
            _refuse_use(run, ins, p)
        e = f"{p.term()} ? {a} : {b}" if (a, b) != (1, 0) else p.expr
        _set(run, ins, lanes, Kept(e, {a, b} <= {0, 1}, p.line, p.opcode))
    elif base in ("mov", "cvt") and len(ops) == 2 and isinstance(ops[1], Name):
        k = _uniform(run, ins, used[0], lanes, f"`{ins.opcode}`")
        narrow = any(width(m) < 32 for m in mods if m[:1] in ("u", "s", "b"))
        if (narrow and not k.boolean) or any(m.startswith(("f", "bf", "rn", "rz", "rm", "rp")) for m in mods):
            _refuse_use(run, ins, k)
        _set(run, ins, lanes, k)
    elif base == "st" and len(ops) == 2 and used == sorted(operand_registers(ops[1])):
        _shared_store(run, ins, lanes, _uniform(run, ins, used[0], lanes, f"`{ins.opcode}`"), plain)
    else:
        _refuse_use(run, ins, first)


def _set(run: WarpState, ins: Instr, lanes: int, k: Kept) -> None:
    dst = ins.operands[0]
    if not isinstance(dst, Name):
        _refuse_use(run, ins, k)
    assert isinstance(dst, Name)
    for lane in lanes_of(lanes):
        run.write(dst, lane, UNKNOWN)
    run.kept = with_entry(run.kept, dst.name, lanes_of(lanes), k)


def _setp(run: WarpState, ins: Instr, lanes: int, reg: str) -> None:
    ops, mods = ins.operands, ins.mods
    k = _uniform(run, ins, reg, lanes, f"`{ins.opcode}`")
    cmp = next((_CMP[m] for m in mods if m in _CMP), None)
    t = mods[-1] if mods else ""
    if cmp is None or t.startswith(("f", "bf")) or any(m in ("and", "or", "xor") for m in mods):
        _refuse_use(run, ins, k)
    if t.startswith("b") and cmp not in ("==", "!="):
        _refuse_use(run, ins, k)
    if width(t) < 32 and not k.boolean:
        _refuse_use(run, ins, k)  # the comparison sees the low bits only
    a, b = ops[1], ops[2]
    if isinstance(a, Name) and a.name == reg and reg not in operand_registers(b):
        other, op = b, cmp
    elif isinstance(b, Name) and b.name == reg and reg not in operand_registers(a):
        other, op = a, _SWAP[cmp]
    else:
        _refuse_use(run, ins, k)
    assert cmp is not None
    c = _const(_known(run, ins, other, lanes), t)
    e = f"{k.term()} {op} {c}"
    if k.boolean and (op, c) in (("!=", 0), ("==", 1)):
        e = k.expr
    dst = ops[0]
    lane_list = lanes_of(lanes)
    first = dst.first if isinstance(dst, Pair) else dst.name if isinstance(dst, Name) else None
    if first is None:
        _refuse_use(run, ins, k)
    assert first is not None
    for lane in lane_list:
        run.write(Name(first), lane, UNKNOWN, 1)
    run.kept = with_entry(run.kept, first, lane_list, Kept(e, True, k.line, k.opcode))
    if isinstance(dst, Pair) and dst.second != "_":
        for lane in lane_list:
            run.write(Name(dst.second), lane, UNKNOWN, 1)
        run.kept = with_entry(run.kept, dst.second, lane_list, Kept(negate(e), True, k.line, k.opcode))


def _word(run: WarpState, ins: Instr, lanes: int, addr: object, kept_only: bool = False) -> tuple[int, int] | None:
    """(offset, bytes) in this CTA's shared memory that every executing lane accesses, or None when the access
    is not in shared memory (with ``kept_only``: when no lane's bytes meet a word that holds a kept value);
    refused when lanes differ or an address is not known."""
    size = element_bytes(run, ins)
    targets = {shared_target(run.address(addr, lane), space_of(ins), run.rank)  # type: ignore[arg-type]
               for lane in lanes_of(lanes)}
    if targets == {None}:
        return None
    if kept_only and not any(t is None or t[0] != run.rank or any(o < t[1] + size and t[1] < o + n
                                                                  for o, (n, _b) in run.mem.kept_words.items())
                             for t in targets):
        return None  # an ordinary access: every lane's bytes known and apart from the kept words
    if len(targets) != 1 or None in targets:
        raise run.refuse(ins, "the lanes of this access of a __shared__ word that holds a value read from a flag "
                         "give different (or unknown) addresses")
    t = targets.pop()
    assert t is not None
    if t[0] != run.rank:
        raise run.refuse(ins, "a value read from a flag stored to another CTA's shared memory is not modelled")
    return t[1], size


def _shared_store(run: WarpState, ins: Instr, lanes: int, k: Kept, plain: Callable[[Instr, int], None]) -> None:
    if lanes & (lanes - 1):
        raise run.refuse(ins, f"{bin(lanes).count('1')} lanes store the value read by `{k.opcode}` at PTX line "
                         f"{k.line}; the language's flag store (which carries it to the CTA) is one thread's")
    if any(m in ("global", "local", "param") for m in ins.mods):
        _refuse_use(run, ins, k)
    w = _word(run, ins, lanes, ins.operands[0])
    if w is None:
        _refuse_use(run, ins, k)
    assert w is not None
    off, size = w
    if size < 4 and not k.boolean:
        raise run.refuse(ins, f"a store of {size} bytes of the value read by `{k.opcode}` at PTX line {k.line}, "
                         "which may not fit: only a value that is 0 or 1 is taken in fewer than 4 bytes")
    for o, (n, _b) in run.mem.kept_words.items():
        if (o, n) != (off, size) and o < off + size and off < o + n:
            raise run.refuse(ins, "this store overlaps a __shared__ word that holds a value read from a flag at "
                             "other bounds")
    prev = run.mem.kept_words.get(off)
    run.mem.kept_words[off] = (size, k.boolean and (prev is None or prev[1]))
    n0 = len(run.events)
    plain(ins, lanes)
    data = tuple(id(e) for e in run.events[n0:])  # its shared-memory write: this store's, not another (kept_words.py)
    run.events.insert(n0, Event("kflag", (f"st.relaxed.cta {{S}}, {k.expr};", off, size, k.boolean, data), lanes,
                                ins))


def _kept_load(run: WarpState, ins: Instr, lanes: int) -> tuple[int, bool] | None:
    """A load of a __shared__ word that holds a value read from a flag: its `let` event (before the load's
    own), and (offset, 0/1 only) for the result; None for any other instruction."""
    if ins.base not in ("ld", "ldu") or not run.mem.kept_words or any(
            m in ("global", "local", "param", "const") for m in ins.mods):
        return None
    dst = ins.operands[0] if ins.operands else None
    if isinstance(dst, Name) and not result_read(run.cfg.body, dst.name):
        return None  # a value nothing reads: the load is its slot's read only (its race rules still apply)
    w = _word(run, ins, lanes, ins.operands[1], kept_only=True)
    if w is None:
        return None
    off, size = w
    for o, (n, boolean) in run.mem.kept_words.items():
        if o < off + size and off < o + n:
            if (o, n) != (off, size) or not isinstance(ins.operands[0], Name):
                raise run.refuse(ins, "this load reads part of a __shared__ word that holds a value read from "
                                 "a flag (or more than it); only a load of the whole word is modelled")
            run.events.append(Event("kflag", (f"let v{ins.line} = ld.relaxed.cta {{S}};", off, size, boolean),
                                    lanes, ins))
            return off, boolean
    return None


def guard(run: WarpState, ins: Instr, active: int) -> bool:
    """Whether the guard of ``ins`` is a kept predicate in some active lane (then a branch is forked and any
    other instruction refused)."""
    if ins.guard is None or ins.guard not in run.kept:
        return False
    got = run.kept[ins.guard]
    hit = [lane for lane in lanes_of(active) if lane in got]
    if not hit:
        return False
    if ins.base != "bra":
        k = got[hit[0]]
        raise run.refuse(ins, f"the guard of `{ins.opcode}` derives from the value `{k.opcode}` read from a flag at "
                         f"PTX line {k.line} (kept as `{k.expr}`); a value read from a flag is modelled where it "
                         "decides a branch, not an instruction's guard")
    return True


def fork(run: WarpState, top: _Entry, ins: Instr, active: int) -> None:
    """A branch on a kept predicate: both outcomes, written `if E { … } else { … }` (module docstring)."""
    assert ins.guard is not None
    k = _uniform(run, ins, ins.guard, active, "this branch")
    if not run.forks_probes:
        raise run.refuse(ins, "a branch on a value read from a flag in a kernel extracted with a symbolic "
                         "parameter (--symbolic) is not modelled; extract it at fixed values")
    i = top.pc
    cfg = run.cfg
    target = cfg.target(ins)
    join = cfg.ipdom.get(i, EXIT)
    if target <= i or any(cfg.body[n].base == "bra" and cfg.target(cfg.body[n]) <= i
                          for n in cfg.region(i, join) if join != EXIT):
        read = next((x for x in cfg.body if x.line == k.line and x.opcode == k.opcode), ins)
        raise run.refuse(read, f"`{k.opcode}` reads a flag in global memory: its value decides the branch at PTX "
                         f"line {ins.line}, which repeats a loop (a spin, left by the value it reads); the language "
                         "writes a spin as `wait.until` on one load and a comparison, and a loop of atomics is not "
                         "modelled")
    if join == EXIT:
        raise run.refuse(ins, f"the paths of this branch on the value read from a flag at PTX line {k.line} do not "
                         "join before the kernel ends; its two outcomes cannot be written as an `if`")
    depth = getattr(run, "kept_depth", 0)
    if active | run.exited != (1 << run.nlanes) - 1:
        raise run.refuse(ins, f"a branch on the value read from a flag at PTX line {k.line} executed by some lanes of "
                         "the warp only (inside another branch that divides it) is not modelled")
    if depth >= MAX_NESTED:
        raise run.refuse(ins, f"branches on values read from flags nest more than {MAX_NESTED} deep here")
    cond = k.expr if not ins.guard_neg else negate(k.expr)  # the condition under which it jumps
    t, f = clone(run), clone(run)
    t.kept_depth = f.kept_depth = depth + 1  # type: ignore[attr-defined]
    for lane in lanes_of(active):
        t.write(Name(ins.guard), lane, 0 if ins.guard_neg else 1, 1)  # t jumps, f falls through
        f.write(Name(ins.guard), lane, 1 if ins.guard_neg else 0, 1)
    t.run([_Entry(target, active, join)])
    f.run([_Entry(i + 1, active, join)])
    if t.exited != f.exited:
        raise run.refuse(ins, f"one outcome of this branch on the value read from a flag at PTX line {k.line} ends "
                         "threads the other does not; a branch whose outcomes do not both go on is not modelled")
    then, other = t.events, f.events
    before = run.kept.get(ins.guard)
    set_t, set_f = (0, 1) if ins.guard_neg else (1, 0)
    untouched = all(t.regs[ins.guard][lane] == set_t and f.regs[ins.guard][lane] == set_f
                    and ins.guard not in t.kept and ins.guard not in f.kept for lane in lanes_of(active))
    _merge(run, [t, f])
    if before is not None and untouched:  # the predicate still holds the kept condition after the join
        run.kept = {**run.kept, ins.guard: before}
    top.pc = join
    if not then and not other:
        return
    if not then:
        then, other, cond = other, [], negate(cond)
    out = [Event("text", (f"if {cond} {{",), active, ins), *then]
    if other:
        out += [Event("text", ("} else {",), active, ins), *other]
    run.events += [*out, Event("text", ("}",), active, ins)]


def negate(cond: str) -> str:
    """The negation of a condition: `a OP c` with the opposite comparison where it is one, the inside of
    `!(…)`, else `!(cond)`."""
    parts = cond.split(" ")
    if len(parts) == 3 and parts[0].isidentifier() and parts[1] in _NEG and parts[2].lstrip("-").isdigit():
        return f"{parts[0]} {_NEG[parts[1]]} {parts[2]}"
    if cond.startswith("!(") and cond.endswith(")") and cond.count("(") == 1:
        return cond[2:-1]
    return f"!({cond})"
