"""Synchronization through global memory read from PTX, for a grid extracted as one protocol.

With `--whole-grid` every CTA of the grid runs (gridextract.py) and the
instructions by which CTAs meet through global memory become the language's
global-memory statements (docs/language.md §3.7), with the semantics the
global-memory family defines (semantics/families/globalmem.py):

* a strong load (`ld.acquire`, `ld.relaxed`, `ld.volatile` = `.relaxed.sys`)
  of a 32-bit word in global memory is `ld.SEM.SCOPE F;`, `red` and an `atom`
  are `red.OP.SEM.SCOPE F, V;` / `atom.OP.SEM.SCOPE F, V;` (PTX: without
  `.sem` an atomic is `.relaxed`, without `.scope` it is `.gpu`), a strong
  store is `st.SEM.SCOPE F, V;`. F is the flag at the word's address (the
  address must be known: a pointer parameter bound with `--param`), V must be
  known. One lane issues it (`elect`): an atomic issued by several lanes of a
  warp at once is refused;
* a loop that repeats one strong load of a flag until a comparison of its
  value with a known value lets it leave (`while (ld_acquire(flag) != v) {}`,
  cutlass/barrier.h `wait_eq`, `wait_lt`) is `wait.until.SEM.SCOPE F CMP V;`,
  with CMP the condition under which the loop leaves;
* `fence.acq_rel.S`, `fence.sc.S` (`fence.S`: acq_rel, the weaker reading)
  and `membar.{cta,gl,sys}` (`fence.sc` at cta, gpu, sys) are the language's
  fences;
* a weak load or store of global memory at a known address is recorded as a
  data access (`gdata`); gridextract.py keeps those whose bytes another
  thread of the grid writes or reads as `global` buffers and drops the rest
  (inputs and outputs).

An `atom` whose old value is read is `let vL = atom…` and its register holds
that kept value (kept.py: the comparisons, the `__shared__` word and the branch
it reaches). Anything else that makes a thread's control flow depend on global
memory (a spin that can give up, a compare-and-swap spin, a load whose value
decides a branch) stays refused at its line by globalsync.py.
"""

from __future__ import annotations

from .access import shared_target
from .globalcomm import _size, global_access
from .kept_values import Kept, result_read, with_entry
from .launch import Event, _lanes
from .parse import Imm, Instr, Name
from .values import UNKNOWN
from .warp import WarpState

SCOPES = ("cta", "cluster", "gpu", "sys")
_RED_OPS = ("add", "inc", "dec", "min", "max")
_ATOM_OPS = ("add", "inc", "dec", "min", "max", "exch", "cas")
_WORD = ("b32", "s32", "u32")
_FLOAT = ("f32", "f64", "f16", "f16x2", "bf16", "bf16x2")
# what a spin loop may compute besides its load and its branch
_SPIN_OK = ("setp", "mov", "add", "sub", "and", "or", "xor", "not", "cvt", "selp", "nanosleep", "bra", "shl", "shr")
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
        "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
_NEG = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_MEMBAR = {"cta": "cta", "gl": "gpu", "sys": "sys"}
_SWAP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _scope(mods: tuple[str, ...], default: str) -> str:
    return next((m for m in mods if m in SCOPES), default)


def fence_text(ins: Instr) -> str | None:
    """The language's fence for a thread fence, or None for any other fence (left to fences.py)."""
    words = ins.opcode.split(".")
    if words[0] == "membar" and len(words) == 2 and words[1] in ("cta", "gl", "sys"):
        return f"fence.sc.{_MEMBAR[words[1]]};"
    if words[0] == "fence" and len(words) in (2, 3) and words[-1] in SCOPES:
        sem = words[1] if len(words) == 3 else "acq_rel"
        if sem in ("sc", "acq_rel"):
            return f"fence.{sem}.{words[-1]};"
    return None


def _one_address(run: WarpState, ins: Instr, lanes: int) -> int | None:
    """The address every executing lane gives the access; None when some lane's is unknown; refused when
    lanes give different addresses."""
    acc = global_access(ins)
    assert acc is not None
    addrs = {run.address(acc[2], lane) for lane in _lanes(lanes)}
    if UNKNOWN in addrs:
        return None
    if len(addrs) != 1:
        raise run.refuse(ins, "the lanes of this warp update different flags at once; the language's flag "
                         "operations are issued by one thread (`elect`)")
    return int(addrs.pop())  # type: ignore[arg-type]


def _value(run: WarpState, ins: Instr, op: object, lanes: int) -> int:
    vals = {run.read(op, lane) for lane in _lanes(lanes)}  # type: ignore[arg-type]
    if UNKNOWN in vals or len(vals) != 1:
        raise run.refuse(ins, f"the value `{ins.opcode}` writes to a flag in global memory is not known (or "
                         "differs between lanes); the language's flag operations take a value the protocol "
                         "computes")
    v = int(vals.pop())  # type: ignore[arg-type]
    return v - (1 << 32) if v >= 1 << 31 else v


def _is_shared(run: WarpState, addr: int) -> bool:
    return shared_target(addr, "generic", run.rank) is not None


def execute_global(run: WarpState, ins: Instr, lanes: int) -> bool:
    """In a whole-grid extraction: the event of a thread fence, a flag operation or a data access of
    global memory. True when the instruction is handled (nothing else to execute)."""
    base, mods = ins.base, ins.mods
    if base in ("fence", "membar"):
        text = fence_text(ins)
        if text is None:
            return False
        run.events.append(Event("text", (text,), lanes, ins))
        return True
    acc = global_access(ins)
    if acc is None or ins.opcode.startswith("cp."):
        return False
    if base in ("atom", "red") and any(m in _FLOAT for m in mods):
        # a floating-point reduction into a buffer (BlockStripedReduce::reduce's atomicAdd of partials): data,
        # a read-modify-write written as a `write` (ordered like one: two unordered ones are reported)
        _data(run, ins, lanes, "write")
        if base == "atom":
            for lane in _lanes(lanes):
                run.write(ins.operands[0], lane, UNKNOWN)
        return True
    strong = base in ("atom", "red") or any(m in ("volatile", "relaxed", "acquire", "release", "acq_rel")
                                            for m in mods)
    if not strong:
        _data(run, ins, lanes)
        return False
    addr = _one_address(run, ins, lanes)
    if addr is not None and _is_shared(run, addr):
        return False  # a generic address in shared memory: not this module's
    if addr is None:
        raise run.refuse(ins, f"`{ins.opcode}` synchronizes through global memory at an address that is not "
                         "known: bind the pointer parameter it comes from with --param N=ADDRESS")
    if not any(m in _WORD for m in mods):
        raise run.refuse(ins, f"`{ins.opcode}` is not a 32-bit access; flags in global memory are modelled "
                         "as 32-bit words")
    if lanes & (lanes - 1):
        raise run.refuse(ins, f"{bin(lanes).count('1')} lanes of this warp issue `{ins.opcode}` at once; the "
                         "language's flag operations are issued by one thread (`elect`)")
    ops = ins.operands
    if base in ("ld", "ldu"):
        sem = "relaxed" if "volatile" in mods or "relaxed" in mods else "acquire"
        scope = "sys" if "volatile" in mods else _scope(mods, "sys")
        text = f"ld.{sem}.{scope} {{F}};"
        for lane in _lanes(lanes):
            run.write(ops[0], lane, UNKNOWN)
    elif base == "st":
        sem = "relaxed" if "volatile" in mods or "relaxed" in mods else "release" if "release" in mods else None
        if sem is None:
            raise run.refuse(ins, f"`{ins.opcode}` is a store with semantics the language's `st` does not have")
        scope = "sys" if "volatile" in mods else _scope(mods, "sys")
        text = f"st.{sem}.{scope} {{F}}, {_value(run, ins, ops[1], lanes)};"
    else:
        op = next((m for m in mods if m in _ATOM_OPS), None)
        allowed = _RED_OPS if base == "red" else _ATOM_OPS
        if op not in allowed:
            raise run.refuse(ins, f"`{ins.opcode}`: the language's `{base}` has the operations "
                             f"{', '.join(allowed)}")
        if op in ("min", "max") and "u32" in mods:
            raise run.refuse(ins, f"`{ins.opcode}`: an unsigned min/max of a flag is not modelled (the "
                             "language's flags are signed integers)")
        sem = next((m for m in mods if m in ("relaxed", "acquire", "release", "acq_rel")), "relaxed")
        scope = _scope(mods, "gpu")
        if base == "red":
            text = f"red.{op}.{sem}.{scope} {{F}}, {_value(run, ins, ops[1], lanes)};"
        else:
            vals = ", ".join(str(_value(run, ins, o, lanes)) for o in ops[2:])
            text = f"atom.{op}.{sem}.{scope} {{F}}, {vals};"
            for lane in _lanes(lanes):
                run.write(ops[0], lane, UNKNOWN)
            if isinstance(ops[0], Name) and result_read(run.cfg.body, ops[0].name):
                # its old value is read: the language's kept value, `let vL = atom…` (kept.py)
                text = f"let v{ins.line} = {text}"
                run.kept = with_entry(run.kept, ops[0].name, _lanes(lanes), Kept(f"v{ins.line}", False, ins.line,
                                                                                 ins.opcode))
    run.events.append(Event("gflag", (text, addr), lanes, ins))
    return True


def _data(run: WarpState, ins: Instr, lanes: int, kind: str | None = None) -> None:
    """A weak load or store of global memory: recorded per lane at its bytes when its address is known
    (an unknown one is left to globalcomm.py, which refuses it if another thread may write its bytes)."""
    acc = global_access(ins)
    assert acc is not None
    reads, _writes, op = acc
    size = _size(ins.mods)
    foot = []
    for lane in _lanes(lanes):
        a = run.address(op, lane)
        if a is UNKNOWN or _is_shared(run, int(a)) or run._in_zero(a):  # type: ignore[arg-type]
            return
        foot.append((lane, -1, int(a), int(a) + size))  # type: ignore[arg-type]
    if foot:
        kind = kind or ("read" if reads else "write")
        args: tuple[object, ...] = (kind,)
        if ins.base == "st" and size == 4 and len(foot) == 1 and len(ins.operands) == 2:
            v = run.read(ins.operands[1], foot[0][0])
            if v is not UNKNOWN:  # a plain store of a known word: `st.weak F, V;` if the word is a flag's
                args = (kind, int(v) - (1 << 32) if int(v) >= 1 << 31 else int(v))  # type: ignore[arg-type]
        run.events.append(Event("gdata", args, lanes, ins, footprint=tuple(foot)))


def writes_flag(ins: Instr) -> bool:
    """An instruction that may change a flag in global memory (an atomic, a strong store): skipping it (in a
    region decided by data, under an unknown guard) would drop a signal or a reset from the protocol."""
    if global_access(ins) is None or ins.opcode.startswith("cp."):
        return False
    if ins.base in ("atom", "red"):
        return not any(m in _FLOAT for m in ins.mods)
    return ins.base == "st" and any(m in ("volatile", "relaxed", "release") for m in ins.mods)


def refuse_skipped_flags(run: WarpState, region: list[Instr]) -> None:
    """In a whole-grid extraction, a flag write the executor would skip is refused at its line."""
    for ins in region:
        if writes_flag(ins):
            raise run.refuse(ins, f"`{ins.opcode}` may change a flag in global memory, and whether it runs is "
                             "decided by a value that is not known (data): skipping it would drop a signal or "
                             "a reset from the protocol")


def spin_wait(run: WarpState, branch: int, join: int, active: int) -> bool:
    """A loop that repeats one strong load of a flag until its value lets it leave, at its back edge:
    replace the load's event by `wait.until` and leave the loop. False when the loop is not one."""
    cfg = run.cfg
    body = cfg.body
    ins = body[branch]
    head = cfg.target(ins)
    if head > branch or join != branch + 1 or ins.guard is None:
        return False
    loop = list(range(head, branch + 1))
    if any(body[n].base not in _SPIN_OK and body[n].base not in ("ld", "ldu") for n in loop):
        return False
    if any(body[n].base == "bra" for n in loop[:-1]):
        return False
    loads = [n for n in loop if body[n].base in ("ld", "ldu")]
    if len(loads) != 1:
        return False
    load = body[loads[0]]
    setp = [body[n] for n in loop if body[n].base == "setp" and isinstance(body[n].operands[0], Name)
            and body[n].operands[0].name == ins.guard]  # type: ignore[union-attr]
    if len(setp) != 1 or not run.events or run.events[-1].instr is not load or run.events[-1].kind != "gflag":
        return False
    cmp_ins = setp[0]
    cmp = next((_CMP[m] for m in cmp_ins.mods if m in _CMP), None)
    dst = load.operands[0]
    a, b = cmp_ins.operands[1], cmp_ins.operands[2]
    if cmp is None or not isinstance(dst, Name):
        return False
    if isinstance(a, Name) and a.name == dst.name:
        other = b
    elif isinstance(b, Name) and b.name == dst.name:
        other, cmp = a, _SWAP[cmp]
    else:
        return False
    if not isinstance(other, Name | Imm):
        return False
    vals = {run.read(other, lane) for lane in _lanes(active)}
    if UNKNOWN in vals or len(vals) != 1:
        raise run.refuse(load, "a loop waits on this flag in global memory for a value that is not known")
    v = int(vals.pop())  # type: ignore[arg-type]
    if "s32" in cmp_ins.mods and v >= 1 << 31:
        v -= 1 << 32
    leave = cmp if ins.guard_neg else _NEG[cmp]  # `@p bra head` repeats while p: it leaves when not p
    ev = run.events.pop()
    text = str(ev.args[0])
    sem, scope = text.split()[0].split(".")[1:3]
    run.events.append(Event("gflag", (f"wait.until.{sem}.{scope} {{F}} {leave} {v};", ev.args[1]), ev.lanes, load))
    for n in loop:
        run.havoc(body[n], active)
    return True
