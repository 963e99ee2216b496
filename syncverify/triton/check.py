"""Check a Triton call: compile it (call.py), extract the protocol at its launch, check it, and place each
finding at the Python line Triton's `.loc` names (the kernel's own source)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import budget
from ..check import check_protocol
from ..cli.kernel import _at_source, _same_site_sv204
from ..diagnostics import InputError
from ..lang import load
from ..options import Options
from ..ptx.extract import extract
from ..ptx.parse import PtxError
from ..ptx.undefined import Undefined, finding_result
from ..result import CheckResult, Verdict
from .call import Compiled, Grid, compile_call


@dataclass(frozen=True)
class TritonCheck:
    """The verdict on one call, with what it covers: the compiled kernel and the launch it was extracted at.
    `refusal` is set (and `result` is an error) when extraction cannot model an instruction: the kernel is
    then neither safe nor unsafe, and `render()` says where."""

    result: CheckResult
    compiled: Compiled
    refusal: PtxError | None = None

    @property
    def verdict(self) -> Verdict:
        return self.result.verdict

    @property
    def safe(self) -> bool:
        return self.refusal is None and self.result.verdict is Verdict.SAFE

    @property
    def unsafe(self) -> bool:
        """A violation was found: the kernel hangs, races or misuses a barrier at this launch."""
        return self.refusal is None and self.result.verdict is Verdict.VIOLATION

    def render(self) -> str:
        """The findings as the command line prints them (text, no colour)."""
        if self.refusal is not None:
            return self.refusal.render()
        import io

        from ..report import text

        buf = io.StringIO()
        text.render([self.result], text.make_console(buf, width=1000))
        return buf.getvalue()


def check(fn: Any, grid: Grid, *args: Any, options: Options | None = None, arch: int = 90,
          **kwargs: Any) -> TritonCheck:
    """Check `fn[grid](*args, **kwargs)` -- Triton's launch syntax, with the same arguments, constexprs and
    compile options (num_warps, num_stages, num_ctas, maxnreg) -- on sm_`arch`, without a GPU.
    Tensors may be `syncverify.triton.tensor(...)` stand-ins; host-side `TensorDescriptor`s give the
    kernel its tensor maps and their boxes."""
    compiled = compile_call(fn, grid, args, kwargs, arch)
    return check_compiled(compiled, options or Options())


def check_compiled(compiled: Compiled, options: Options) -> TritonCheck:
    """Extract the compiled kernel at its launch and check the protocol."""
    path = str(compiled.ptx)
    start = time.monotonic()
    try:
        with budget.clock(options.timeout):
            ex = extract(compiled.module(), compiled.launch, compiled.kernel)
    except Undefined as ub:
        return TritonCheck(finding_result(path, ub, compiled.kernel), compiled)
    except PtxError as err:
        return TritonCheck(CheckResult(path=path, protocol=compiled.kernel, verdict=Verdict.ERROR, bound=""),
                           compiled, err)
    except budget.OutOfBudget as out:
        return TritonCheck(CheckResult(path=path, protocol=compiled.kernel, verdict=Verdict.INCONCLUSIVE, bound="",
                                       coverage=f"the kernel was not extracted: {out}", stopped_by=out.kind),
                           compiled)
    options = replace(options, timeout=max(options.timeout - (time.monotonic() - start), 1e-3))
    sync_name = path[: -len(".ptx")] + ".extracted.sync"
    try:
        protocol = load(ex.text, options.defines, path=sync_name)
    except InputError as err:
        d = err.diagnostics[0]
        return TritonCheck(CheckResult(path=path, protocol=compiled.kernel, verdict=Verdict.ERROR, bound=""),
                           compiled, PtxError(path, 1, 1, f"the extracted protocol is not valid .sync: {d.message}"))
    result = check_protocol(protocol, options)
    diags = tuple(_at_source(d, ex, sync_name) for d in result.diagnostics if not _same_site_sv204(d, ex))
    return TritonCheck(replace(result, path=path, diagnostics=diags, bound=bound_line(compiled)), compiled)


def bound_line(compiled: Compiled) -> str:
    """What the verdict covers: the launch, the integers the call bound and the boxes, by the call's names."""
    la = compiled.launch
    md = compiled.metadata
    out = f"launch block {la.block[0]}, cluster {la.cluster[0]}, grid " + "x".join(map(str, la.grid or (1,)))
    out += "".join(f", {k}={md[k]}" for k in ("num_warps", "num_stages") if k in md)
    if compiled.constexprs:
        out += ", " + ", ".join(f"{k}={v}" for k, v in compiled.constexprs.items())
    shown = [f"{compiled.labels.get(k, k)}={v}" for k, v in la.params.items()
             if isinstance(v, int) and not compiled.labels.get(k, "").endswith((".shape", ".strides"))]
    if shown:
        out += ", " + ", ".join(shown)
    if la.tensor_bytes:
        out += ", boxes " + ", ".join(f"{compiled.labels.get(p, p)}={n} bytes"
                                      for (p, _o), n in la.tensor_bytes.items())
    return out


def check_all(fn: Any, grid: Grid, calls: Sequence[Mapping[str, Any]], *args: Any,
              options: Options | None = None, arch: int = 90) -> list[TritonCheck]:
    """One check per keyword set in `calls` (e.g. each autotune config's values) of the same call."""
    return [check(fn, grid, *args, options=options, arch=arch, **dict(kw)) for kw in calls]
