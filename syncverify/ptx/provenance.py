"""Which kernel parameters a register's value comes from: the name a refusal tells the user to bind.

An unknown branch that decides synchronization is most often a loop over a trip count the host passes
(`for (int t = 0; t < num_tiles; ++t)`). The executor knows only that the predicate is unknown; this
module follows the function's definitions backwards (every instruction that writes a register, whatever
the path: a superset of the real sources) to the `ld.param` loads behind it, so that the refusal can say
`--param 2=N` instead of "bind it with --param". It only names candidates for the message; nothing is
decided from it.
"""

from __future__ import annotations

from .parse import Addr, Function, Instr, Name, operand_registers


def _writes(ins: Instr) -> set[str]:
    if not ins.operands or ins.base in ("st", "bar", "barrier", "bra", "ret", "exit", "mbarrier", "cp", "fence"):
        return set()
    return operand_registers(ins.operands[0]) if isinstance(ins.operands[0], Name) else set()


def params_behind(fn: Function, reg: str) -> list[str]:
    """The `.param` symbols the value of `reg` may be loaded from, in the order of the kernel's parameters."""
    body = fn.body or ()
    defs: dict[str, list[Instr]] = {}
    for ins in body:
        for r in _writes(ins):
            defs.setdefault(r, []).append(ins)
    seen: set[str] = set()
    todo = [reg]
    found: set[str] = set()
    while todo and len(seen) < 4096:
        r = todo.pop()
        if r in seen:
            continue
        seen.add(r)
        for ins in defs.get(r, ()):
            for op in ins.operands[1:]:
                if ins.base == "ld" and "param" in ins.mods and isinstance(op, Addr) and op.base is not None:
                    found.add(op.base)
                    continue
                todo.extend(operand_registers(op))
    names = [p.name for p in fn.params]
    return sorted(found, key=lambda n: names.index(n) if n in names else len(names))


def param_hint(fn: Function, reg: str | None, bound: set[str]) -> str:
    """'; it comes from parameter 2 (`…_param_2`): bind it with --param 2=N' for the unbound ones, or ''."""
    if reg is None:
        return ""
    names = [p.name for p in fn.params]
    unbound = [n for n in params_behind(fn, reg)
               if n not in bound and str(names.index(n) if n in names else -1) not in bound]
    if not unbound:
        return ""
    shown = ", ".join(f"parameter {names.index(n)} (`{n}`)" if n in names else f"`{n}`" for n in unbound)
    first = str(names.index(unbound[0])) if unbound[0] in names else unbound[0]
    return f"; it comes from {shown}: bind it with --param {first}=N"
