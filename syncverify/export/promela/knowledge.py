"""The happens-before scheme of semantics/state.py in C: release, acquire, shift_phase and
clear_bits over every live record of the model (buffer slot accesses, in-flight copies, async
reads, mbarrier inits, CTA starts), in the model's `c_code` block.

Written in Promela, every call site would expand them; as C functions each is defined once. A room
of its own because every family's steps call them (an arrive releases, a wait acquires, a phase
completing shifts) and they belong to no family.
"""

from __future__ import annotations

from .base import BITS

# every live record of every key
RECS = "for (q = 0; q < NKEYS; q++) for (i = q * CAP; i < q * CAP + now.nrec[q]; i++)"


class KnowledgeExport:
    """The C knowledge operations (a mixin of the exporter)."""

    def knowledge_c(self) -> list[str]:
        """state.release (whole, partial, relaxed), state.acquire, state.shift_phase, state.clear_bits
        and the syncwarp mark: the C functions the steps call."""
        akn = self.track_akn

        def both(stmt: str) -> str:
            return stmt.format(x="kn") + (" " + stmt.format(x="akn") if akn else "")

        recs = RECS
        shift = "if (k_has({a}, c)) k_set({a}, l); else k_clr({a}, l); k_clr({a}, c);"
        return [
            f"static int k_has(int *a, int h) {{ return (a[h / {BITS}] >> (h % {BITS})) & 1; }}",
            f"static void k_set(int *a, int h) {{ a[h / {BITS}] |= 1 << (h % {BITS}); }}",
            f"static void k_clr(int *a, int h) {{ a[h / {BITS}] &= ~(1 << (h % {BITS})); }}",
            "/* state.release: records known by the lanes (word lw, mask lm) become known by holder t */",
            "static void k_rel(int lw, int lm, int t) {",
            "  int q, i;",
            f"  {recs} {{ {both('if (now.R[i].{x}[lw] & lm) k_set(now.R[i].{x}, t);')} }}",
            "  for (i = 0; i < NMB; i++) if (now.iex[i]) {",
            "    if (now.ikn[i].w[lw] & lm) k_set(now.ikn[i].w, t);",
            "    if (now.iakn[i].w[lw] & lm) k_set(now.iakn[i].w, t); }",
            "  for (i = 0; i < NCTA; i++) if (now.skn[i].w[lw] & lm) k_set(now.skn[i].w, t);",
            "}",
            *self.part_lanes_c(),
            "/* state.release_partial: some lanes of process me release; the other-lanes holder does not",
            "   publish me's own generic accesses made by a lane outside `rel` */",
            "static void k_rel_lanes(int me, int lw, int lm, int lb, unsigned rel, int t) {",
            "  int q, i, src;",
            f"  {recs} {{",
            "    src = (now.R[i].owner == me && !(now.R[i].flags & 129) && now.R[i].part != 0",
            "           && (part_lanes(me, now.R[i].part) & ~rel)) ? (lm & lb) : lm;",
            f"    {both('if (now.R[i].{x}[lw] & src) k_set(now.R[i].{x}, t);')} }}",
            "  for (i = 0; i < NMB; i++) if (now.iex[i]) {",
            "    if (now.ikn[i].w[lw] & lm) k_set(now.ikn[i].w, t);",
            "    if (now.iakn[i].w[lw] & lm) k_set(now.iakn[i].w, t); }",
            "  for (i = 0; i < NCTA; i++) if (now.skn[i].w[lw] & lm) k_set(now.skn[i].w, t);",
            "}",
            "/* barriers._mark_warpsynced: after me's syncwarp, its own generic accesses that its lanes know",
            "   are held whole by every lane (state.F_WARPSYNCED = 128) */",
            "static void k_warpsync(int me, int lw, int lm) {",
            "  int q, i;",
            f"  {recs} if (now.R[i].owner == me && now.R[i].part != 0 && !(now.R[i].flags & 1)",
            "      && (now.R[i].kn[lw] & lm) == lm) now.R[i].flags |= 128;",
            "}",
            "/* state.release(relaxed=True): only inits published by fence.mbarrier_init and CTA starts */",
            "static void k_rel_relaxed(int lw, int lm, int t) {",
            "  int i;",
            "  for (i = 0; i < NMB; i++) if (now.iex[i] && (now.iakn[i].w[lw] & lm)) {",
            "    k_set(now.ikn[i].w, t); k_set(now.iakn[i].w, t); }",
            "  for (i = 0; i < NCTA; i++) if (now.skn[i].w[lw] & lm) k_set(now.skn[i].w, t);",
            "}",
            "/* state.acquire: records known by holder s become known by the lanes */",
            "static void k_acq(int s, int lw, int lm) {",
            "  int q, i;",
            f"  {recs} {{ {both('if (k_has(now.R[i].{x}, s)) now.R[i].{x}[lw] |= lm;')} }}",
            "  for (i = 0; i < NMB; i++) if (now.iex[i]) {",
            "    if (k_has(now.ikn[i].w, s)) now.ikn[i].w[lw] |= lm;",
            "    if (k_has(now.iakn[i].w, s)) now.iakn[i].w[lw] |= lm; }",
            "  for (i = 0; i < NCTA; i++) if (k_has(now.skn[i].w, s)) now.skn[i].w[lw] |= lm;",
            "}",
            "/* state.shift_phase: the knowledge of the current phase (c) becomes the last phase's (l) */",
            "static void k_shift(int c, int l) {",
            "  int q, i;",
            f"  {recs} {{ {shift.format(a='now.R[i].kn')}"
            + (f" {shift.format(a='now.R[i].akn')}" if akn else "") + " }",
            f"  for (i = 0; i < NMB; i++) {{ {shift.format(a='now.ikn[i].w')} {shift.format(a='now.iakn[i].w')} }}",
            f"  for (i = 0; i < NCTA; i++) {{ {shift.format(a='now.skn[i].w')} }}",
            "}",
            "/* state.clear_bits for one holder */",
            "static void k_clear(int h) {",
            "  int q, i;",
            f"  {recs} {{ {both('k_clr(now.R[i].{x}, h);')} }}",
            "  for (i = 0; i < NMB; i++) { k_clr(now.ikn[i].w, h); k_clr(now.iakn[i].w, h); }",
            "  for (i = 0; i < NCTA; i++) k_clr(now.skn[i].w, h);",
            "}",
        ]
