"""Tensor maps: `tensormap NAME[N];`, the `map T` clause of `tma.load` (the map the copy's tensormap
proxy reads), `tensormap.replace T` (a generic rewrite of the map) and the tensormap proxy fences
`fence.proxy.tensormap::generic.release.SCOPE` / `.acquire.SCOPE T` (docs/language.md §3.3c;
semantics/families/tensormap.py).

A room of its own because a tensor map is neither a shared-memory slot nor a global buffer that
`read`/`write` take: only a TMA copy reads it (through the tensormap proxy) and only
`tensormap.replace` writes it.
"""

from __future__ import annotations

from dataclasses import replace

from lark import Tree

from ... import ir
from .statements import Statements

TENSORMAP_BYTES = 128  # a CUtensorMap (PTX: the tensor-map object is 128 bytes)
_SCOPES = ("cta", "cluster", "gpu", "sys")


class TensormapOps(Statements):
    """The `tensormap` declaration, the `map` clause and the operations on tensor maps."""

    def decl_tensormap_decl(self, t: Tree) -> None:
        name, array, _ = self._split_array(t.children)  # type: ignore[attr-defined]
        size, ok = self._array(array)  # type: ignore[attr-defined]
        if not self.declare(name, "tensor map") or not ok:
            return
        self.buffers[str(name)] = ir.Buffer(str(name), size, TENSORMAP_BYTES, self.span(t), "tensormap")

    def _map_clause(self, clauses: dict) -> tuple[bool, ir.Ref | None]:
        """The `map T` clause (ok, its map); not ok: an error is reported."""
        if "map" not in clauses:
            return True, None
        ref = self.ref(clauses["map"], "tensor map")
        return ref is not None, ref

    def op_tma_load(self, span, quals, operands, clauses):
        ok, tmap = self._map_clause(clauses)
        op = super().op_tma_load(span, quals, operands, clauses)  # type: ignore[misc]
        if op is None or not ok:
            return None
        return op if tmap is None else replace(op, tmap=tmap)

    def op_tma_store(self, span, quals, operands, clauses):
        if "map" in clauses:
            # A store's map read lasts until the store completes; the language's bulk wait
            # (`bulk.wait_read`) waits for its source reads only, so nothing could order a rewrite after it.
            self.error("SV110", "`map` on `tma.store` is not modelled yet: the store's tensor-map read lasts until "
                       "the store completes, and `bulk.wait_read` waits for its source reads only",
                       self.span(clauses["map"]))
            return None
        return super().op_tma_store(span, quals, operands, clauses)  # type: ignore[misc]

    def op_tensormap_replace(self, span, quals, operands, clauses):
        ref = self.ref(operands[0], "tensor map")
        return ir.TensormapReplace(ref, span) if ref else None

    def _scope(self, span, quals) -> str | None:
        scopes = [q[1:] for q in quals if q[1:] in _SCOPES]
        if len(scopes) != 1:
            self.error("SV110", "a tensormap proxy fence takes one scope: `.cta`, `.cluster`, `.gpu` or `.sys`", span)
            return None
        return scopes[0]

    def op_fence_proxy_tensormap__generic_release(self, span, quals, operands, clauses):
        scope = self._scope(span, quals)
        return ir.TensormapFence("release", None, scope, span) if scope else None

    def op_fence_proxy_tensormap__generic_acquire(self, span, quals, operands, clauses):
        scope = self._scope(span, quals)
        ref = self.ref(operands[0], "tensor map")
        return ir.TensormapFence("acquire", ref, scope, span) if scope and ref else None
