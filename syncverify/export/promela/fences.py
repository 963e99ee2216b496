"""The Promela of fences: `fence.proxy.async` and its halves (the rule is
semantics/families/proxy_fence.py's, which also writes the step), and `fence.mbarrier_init`, which
publishes a thread's inits at cluster scope.

A room of its own as the proxy fences are a family of their own in the semantics; the C here is
the async side of the conflict scan (SV601) and the fences' effect on the records. The steps form a
mixin of the exporter; ``STEPS`` registers its operation by type.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir
from ...semantics.families import proxy_fence


class FenceExport:
    """The steps of the fences (a mixin of the exporter)."""

    def step_fence(self, p: int, proc, op: ir.Fence, ins, lanes: str, part: int, b: list[str]) -> str:
        cta = proc.cta
        if op.kind == "proxy_async":
            if self.track_akn:
                b += proxy_fence.promela(op, cta, part, lanes, self.spc, self.nkeys)
        else:
            b.append("_a = lw; _b = lb | wb; c_code { fence_init({me}, _a, _b); };   /* fence.mbarrier_init */")
        return "true"

    def unfenced_c(self) -> list[str]:
        """C: the async side of the conflict scan (SV601) and `fence.proxy.async`."""
        return [
            "/* machine._conflicts, async side: a generic write of key q not fenced into the async proxy */",
            "static int unfenced(int q, int lw, int lm) {",
            "  int x;",
            "  for (x = q * CAP; x < q * CAP + now.nrec[q]; x++) {"
            + (" if (now.R[x].lo >= _hi || _lo >= now.R[x].hi) continue;" if self.track_region else ""),
            "    if (now.R[x].kind == 1 && !(now.R[x].flags & 9) && (now.R[x].akn[lw] & lm) != lm) return 1; }",
            "  return 0;",
            "}",
            "/* fence.proxy.async (families/proxy_fence.py): in the slots of keys klo..khi-1, this",
            "   process's own generic writes (when own) and the writes it acquired (holders fm) */",
            "static void fence_proxy(int me, int part, int pw, int pm, int fm, int klo, int khi, int own) {",
            "  int q, i;",
            "  for (q = klo; q < khi; q++) for (i = q * CAP; i < q * CAP + now.nrec[q]; i++)",
            "    if (now.R[i].kind == 1 && !(now.R[i].flags & 1)) {",
            "      if (now.R[i].owner != me) now.R[i].akn[pw] |= now.R[i].kn[pw] & fm;",
            "      else if (own && !(part_lanes(me, now.R[i].part) & ~part_lanes(me, part)))",
            "        now.R[i].akn[pw] |= now.R[i].kn[pw] & pm; }",
            "}",
        ]

    def fence_init_c(self) -> list[str]:
        """C: `fence.mbarrier_init`."""
        return [
            "/* fence.mbarrier_init: this thread's inits are published at cluster scope */",
            "static void fence_init(int me, int pw, int pm) {",
            "  int i;",
            "  for (i = 0; i < NMB; i++)",
            "    if (now.iex[i] && now.iown[i] == me) now.iakn[i].w[pw] |= now.ikn[i].w[pw] & pm;",
            "}",
        ]


STEPS: dict[type, Callable] = {
    ir.Fence: FenceExport.step_fence,
}
