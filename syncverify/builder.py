"""Build a protocol in code, for compilers that generate synchronization protocols.

    from syncverify import ProtocolBuilder, check_protocol, Options

    b = ProtocolBuilder("ring")
    STAGES, ITERS = b.param("STAGES", 2), b.param("ITERS", 4)
    b.cta_threads(64)
    producer, consumer = b.role("producer", "warp", 0), b.role("consumer", "warp", 1)
    tile = b.smem("tile", 4096, slots=STAGES)
    full, empty = b.mbarrier("full", count=1, size=STAGES), b.mbarrier("empty", count=32, size=STAGES)
    with b.if_(producer):
        with b.for_("k", 0, ITERS) as k:
            ...
    result = check_protocol(b.build(), Options())

Design: the builder writes canonical `.sync` text, one statement per line, and
loads it with :func:`syncverify.load`. There is one front end, so a protocol
built in code gets exactly the IR, the checks (names, counts, roles, every
SV1xx input error) and the error messages that the same protocol gets from a
file; nothing here can drift from the language. The text is a *synthetic
source*: its path is ``<builder:NAME>``, :attr:`ProtocolBuilder.source` returns
it, and every statement method returns the line number it was written at, so a
compiler can map a diagnostic's line, a counterexample step's line or a trace
view's hover text back to its own IR node (pass ``comment=`` to carry the
compiler's own provenance into the text; it shows in traces). Writing the text
to a file (:meth:`ProtocolBuilder.save`) gives a spec that `syncverify check`
and `syncverify trace` take as is.

Expressions are :class:`Term` values built with Python operators: ``k % STAGES``,
``(k // STAGES + 1) % 2``. ``/`` and ``//`` both mean the language's ``/``: C's
division truncating toward zero, not Python's floor division. ``==``/``!=`` and
``and``/``or``/``not`` cannot be overloaded usefully in Python; use
``a.eq(b)``, ``a.ne(b)``, ``a.and_(b)``, ``a.or_(b)``, ``a.not_()``. A Term used
as a Python truth value raises TypeError, so ``if k < 2:`` in generator code is
caught instead of silently taking one branch.

Mistakes the builder can see (a bad identifier, a declaration inside a block, a
Python bool where an expression belongs) raise ValueError or TypeError at once;
everything else is found by the front end when :meth:`ProtocolBuilder.build`
loads the text and raises :class:`BuildError` (an :class:`InputError`) whose
message quotes the generated lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import ir
from .diagnostics import Diagnostic, InputError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*\Z")
_QUAL = re.compile(r"[A-Za-z_][A-Za-z_0-9:]*\Z")  # spec.lark's QUAL after its dot: `fence::after_thread_sync`
_RESERVED = {"i", "cta", "instance", "protocol", "param", "cluster", "role", "smem", "mbarrier", "named", "let",
             "for", "in", "if", "else", "elect", "per", "first", "choose"}

# binding strength of each operator, loosest first (the language's table, which is C's)
_LEVEL = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7, ">=": 7,
          "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}
_UNARY = 11
_ATOM = 12
_COND = 0  # `c ? a : b`, looser than `||`


def _name(name: str, what: str, variable: bool = False) -> str:
    """``variable``: a `let`/`for` name, which may be `i` (the element index only inside array declarations)."""
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"{what} name {name!r} is not an identifier (letters, digits, _; not starting with a digit)")
    if name in _RESERVED and not (variable and name == "i"):
        raise ValueError(f"{what} name {name!r} is reserved in the protocol language")
    return name


class Term:
    """An integer expression of the protocol language, kept as text with its binding strength."""

    __slots__ = ("level", "op", "text")

    def __init__(self, text: str, level: int = _ATOM, op: str = ""):
        self.text = text
        self.level = level
        self.op = op  # the outermost binary operator, if any

    def __repr__(self) -> str:
        return f"Term({self.text!r})"

    def __str__(self) -> str:
        return self.text

    def __bool__(self) -> bool:
        raise TypeError(f"`{self.text}` is a protocol expression, not a Python truth value: build the condition "
                        "with b.if_(...), and combine with .and_() / .or_() / .not_()")

    def _bin(self, op: str, other: object, swap: bool = False) -> Term:
        a, b = (term(other), self) if swap else (self, term(other))
        level = _LEVEL[op]
        # parenthesize what binds looser, and (for the reader) a different operator of the same
        # strength on the left: `(k / S) % 2` rather than the equivalent `k / S % 2`
        left = a.text if a.level > level or (a.level == level and a.op == op) else f"({a.text})"
        right = b.text if b.level > level else f"({b.text})"
        return Term(f"{left} {op} {right}", level, op)

    def __add__(self, o: object) -> Term: return self._bin("+", o)
    def __radd__(self, o: object) -> Term: return self._bin("+", o, True)
    def __sub__(self, o: object) -> Term: return self._bin("-", o)
    def __rsub__(self, o: object) -> Term: return self._bin("-", o, True)
    def __mul__(self, o: object) -> Term: return self._bin("*", o)
    def __rmul__(self, o: object) -> Term: return self._bin("*", o, True)
    def __truediv__(self, o: object) -> Term: return self._bin("/", o)
    def __rtruediv__(self, o: object) -> Term: return self._bin("/", o, True)
    def __floordiv__(self, o: object) -> Term: return self._bin("/", o)
    def __rfloordiv__(self, o: object) -> Term: return self._bin("/", o, True)
    def __mod__(self, o: object) -> Term: return self._bin("%", o)
    def __rmod__(self, o: object) -> Term: return self._bin("%", o, True)
    def __and__(self, o: object) -> Term: return self._bin("&", o)
    def __rand__(self, o: object) -> Term: return self._bin("&", o, True)
    def __or__(self, o: object) -> Term: return self._bin("|", o)
    def __ror__(self, o: object) -> Term: return self._bin("|", o, True)
    def __xor__(self, o: object) -> Term: return self._bin("^", o)
    def __rxor__(self, o: object) -> Term: return self._bin("^", o, True)
    def __lshift__(self, o: object) -> Term: return self._bin("<<", o)
    def __rlshift__(self, o: object) -> Term: return self._bin("<<", o, True)
    def __rshift__(self, o: object) -> Term: return self._bin(">>", o)
    def __rrshift__(self, o: object) -> Term: return self._bin(">>", o, True)
    def __lt__(self, o: object) -> Term: return self._bin("<", o)
    def __le__(self, o: object) -> Term: return self._bin("<=", o)
    def __gt__(self, o: object) -> Term: return self._bin(">", o)
    def __ge__(self, o: object) -> Term: return self._bin(">=", o)

    def __neg__(self) -> Term:
        return Term(f"-{self.text}" if self.level >= _UNARY else f"-({self.text})", _UNARY)

    def eq(self, o: object) -> Term:
        return self._bin("==", o)

    def ne(self, o: object) -> Term:
        return self._bin("!=", o)

    def and_(self, o: object) -> Term:
        return self._bin("&&", o)

    def or_(self, o: object) -> Term:
        return self._bin("||", o)

    def not_(self) -> Term:
        return Term(f"!{self.text}" if self.level >= _UNARY else f"!({self.text})", _UNARY)

    def if_else(self, then: object, orelse: object) -> Term:
        """C's `self ? then : orelse` (only the branch taken is evaluated); it binds loosest of all."""
        cond = self.text if self.level >= _LEVEL["||"] else f"({self.text})"
        return Term(f"{cond} ? {term(then)} : {term(orelse)}", _COND)


def term(value: object) -> Term:
    """An int or a Term as a Term; anything else is a TypeError that says what to write instead."""
    if isinstance(value, Term):
        return value
    if isinstance(value, bool):
        raise TypeError("a Python bool is not a protocol expression (did `==` compare two Terms? use a.eq(b))")
    if isinstance(value, int):
        return Term(str(value)) if value >= 0 else Term(f"-{-value}", _UNARY)
    raise TypeError(f"expected an int or a protocol expression, got {type(value).__name__}: {value!r}")


CTA = Term("cta")  # rank of the executing CTA in its cluster
INSTANCE = Term("instance")  # instance index of the executing thread's role
INDEX = Term("i")  # `i`: the element index, only inside role and named-barrier declarations


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to a declared object: `full[s]`, `tile`, `full[*]`."""

    text: str


class Obj:
    """A declared buffer, mbarrier or named barrier; index it (`full[s]`) or take every element (`full.all`)."""

    __slots__ = ("kind", "name", "size")

    def __init__(self, name: str, kind: str, size: object | None):
        self.name = name
        self.kind = kind
        self.size = size

    def __getitem__(self, index: object) -> Ref:
        return Ref(f"{self.name}[{term(index).text}]")

    @property
    def all(self) -> Ref:
        """`NAME[*]`: every element (init and inval only)."""
        return Ref(f"{self.name}[*]")

    def __repr__(self) -> str:
        return f"Obj({self.kind} {self.name})"


class Chosen:
    """An array of `choose` values: ``kv[t]`` is the element for tile t, a Term."""

    __slots__ = ("name", "size")

    def __init__(self, name: str, size: object):
        self.name = name
        self.size = size

    def __getitem__(self, index: object) -> Term:
        return Term(f"{self.name}[{term(index).text}]")

    def __repr__(self) -> str:
        return f"Chosen({self.name}[{self.size}])"


def _ref(obj: Ref | Obj) -> str:
    if isinstance(obj, Ref):
        return obj.text
    if isinstance(obj, Obj):
        return obj.name
    raise TypeError(f"expected a declared object or an element of one (tile, full[s]), got {obj!r}")


def _quals(*quals: str | None) -> str:
    out = ""
    for q in quals:
        if q is None:
            continue
        if not _QUAL.match(q):
            raise ValueError(f"qualifier {q!r} is not an identifier (PTX's `::` allowed)")
        out += f".{q}"
    return out


class BuildError(InputError):
    """The generated text was refused by the front end; the message quotes the lines concerned."""

    def __init__(self, diagnostics: list[Diagnostic], source: str):
        super().__init__(diagnostics)
        self.source = source

    def __str__(self) -> str:
        lines = self.source.splitlines()
        out = []
        for d in self.diagnostics:
            out.append(f"{d.span}: {d.code} {d.message}" if d.span else f"{d.code} {d.message}")
            if d.span and 0 < d.span.line <= len(lines):
                out.append(f"    {d.span.line} | {lines[d.span.line - 1].strip()}")
        return "\n".join(out)


class ProtocolBuilder:
    """Writes one protocol statement by statement; :meth:`build` turns it into the IR."""

    def __init__(self, name: str, *, expect: str | None = None, comment: str | None = None):
        """``expect``: the `// expect:` header (``"safe"`` or codes like ``"SV302, SV502"``), used by
        `check --expect` when the text is written to a file. ``comment``: leading comment lines."""
        self.name = _name(name, "protocol")
        self._head: list[str] = []
        if expect is not None:
            self._head.append(f"// expect: {expect}")
        for text in (comment or "").splitlines():
            self._head.append(f"// {text}".rstrip())
        self._body: list[str] = []
        self._depth = 0
        self._else_ok = False  # the last line closed an `if` block at this depth

    # ------------------------------------------------------------------ text
    @property
    def path(self) -> str:
        """The synthetic file name diagnostics and traces carry."""
        return f"<builder:{self.name}>"

    @property
    def source(self) -> str:
        """The canonical `.sync` text built so far (a complete protocol once every block is closed)."""
        return "\n".join([*self._head, f"protocol {self.name} {{", *self._body, "}"]) + "\n"

    def _emit(self, text: str, comment: str | None = None) -> int:
        line = "  " * (self._depth + 1) + text
        if comment:
            line += "  // " + " ".join(comment.split())
        self._body.append(line)
        self._else_ok = False
        return len(self._head) + 1 + len(self._body)  # 1-based: the `protocol` line comes first

    def _decl(self, text: str, comment: str | None) -> int:
        if self._depth:
            raise ValueError(f"`{text}`: declarations belong at the top level of the protocol, not inside a block")
        return self._emit(text, comment)

    @contextmanager
    def _block(self, head: str, comment: str | None, value: object = None) -> Iterator:
        self._emit(head + " {", comment)
        self._depth += 1
        try:
            yield value
        finally:
            self._depth -= 1
            self._emit("}")

    # ------------------------------------------------------------------ declarations
    def param(self, name: str, value: object, *, comment: str | None = None) -> Term:
        """`param NAME = EXPR;` — overridable with ``defines`` in :meth:`build` (like `-D`)."""
        self._decl(f"param {_name(name, 'param')} = {term(value)};", comment)
        return Term(name)

    def cluster(self, ctas: object, *, comment: str | None = None) -> int:
        return self._decl(f"cluster {term(ctas)};", comment)

    def cta_threads(self, threads: object, *, comment: str | None = None) -> int:
        return self._decl(f"cta threads {term(threads)};", comment)

    def role(self, name: str, kind: str, start: object, end: object | None = None, *,
             instances: object | None = None, comment: str | None = None) -> Term:
        """`role NAME[N] = KIND start;` or, with ``end``, the half-open range `KINDS start..end`.

        ``kind`` is thread, warp or warpgroup; in an instance array use :data:`INDEX` (the language's `i`):
        ``b.role("consumer", "warpgroup", 1 + INDEX, instances=2)``. Returns the role as a guard expression."""
        if kind not in ("thread", "warp", "warpgroup"):
            raise ValueError(f"role kind {kind!r}: expected 'thread', 'warp' or 'warpgroup'")
        arr = f"[{term(instances)}]" if instances is not None else ""
        rng = f"{kind} {term(start)}" if end is None else f"{kind}s {term(start)}..{term(end)}"
        self._decl(f"role {_name(name, 'role')}{arr} = {rng};", comment)
        return Term(name)

    def smem(self, name: str, bytes: object, *, slots: object | None = None, comment: str | None = None) -> Obj:
        arr = f"[{term(slots)}]" if slots is not None else ""
        self._decl(f"smem {_name(name, 'buffer')}{arr} bytes {term(bytes)};", comment)
        return Obj(name, "buffer", slots)

    def tmem(self, name: str, cols: object, *, slots: object | None = None, comment: str | None = None) -> Obj:
        """`tmem NAME[N] cols C;`: tensor-memory regions for the tcgen05 operations (``b.op("tcgen05.mma", …)``)."""
        arr = f"[{term(slots)}]" if slots is not None else ""
        self._decl(f"tmem {_name(name, 'tmem region')}{arr} cols {term(cols)};", comment)
        return Obj(name, "tmem", slots)

    def mbarrier(self, name: str, *, count: object | None = None, size: object | None = None,
                 comment: str | None = None) -> Obj:
        arr = f"[{term(size)}]" if size is not None else ""
        cnt = f" count {term(count)}" if count is not None else ""
        self._decl(f"mbarrier {_name(name, 'mbarrier')}{arr}{cnt};", comment)
        return Obj(name, "mbarrier", size)

    def named(self, name: str, bar_id: object, *, count: object | None = None, size: object | None = None,
              comment: str | None = None) -> Obj:
        """`named NAME[N] id EXPR [count EXPR];` (a name for a hardware barrier id)."""
        arr = f"[{term(size)}]" if size is not None else ""
        cnt = f" count {term(count)}" if count is not None else ""
        self._decl(f"named {_name(name, 'named barrier')}{arr} id {term(bar_id)}{cnt};", comment)
        return Obj(name, "named", size)

    def choose(self, name: str, lo: object, hi: object, *, per_cta: bool = False, size: object | None = None,
               comment: str | None = None) -> Term | Chosen:
        """`choose [per cta] NAME[N] in lo..hi;` — a count the kernel reads from memory, checked for every value
        of the half-open range (``defines`` in :meth:`build` pins it). Returns the value as a Term, or, with
        ``size``, an array whose elements (``kv[t]``) are Terms."""
        arr = f"[{term(size)}]" if size is not None else ""
        per = "per cta " if per_cta else ""
        self._decl(f"choose {per}{_name(name, 'choose')}{arr} in {term(lo)}..{term(hi)};", comment)
        return Chosen(name, size) if size is not None else Term(name)

    # ------------------------------------------------------------------ control flow
    def let(self, name: str, value: object, *, comment: str | None = None) -> Term:
        self._emit(f"let {_name(name, 'variable', variable=True)} = {term(value)};", comment)
        return Term(name)

    def for_(self, var: str, lo: object, hi: object, *, comment: str | None = None):
        """`for VAR in lo..hi { … }` (half-open); the context manager yields VAR as a Term."""
        return self._block(f"for {_name(var, 'loop variable', variable=True)} in {term(lo)}..{term(hi)}", comment,
                           Term(var))

    @contextmanager
    def if_(self, cond: object, *, comment: str | None = None) -> Iterator[None]:
        with self._block(f"if {term(cond)}", comment):
            yield
        self._else_ok = True

    @contextmanager
    def else_(self, *, comment: str | None = None) -> Iterator[None]:
        """The `else` of the `if_` block that was just closed (nest an `if_` inside for `else if`)."""
        if not self._else_ok:
            raise ValueError("else_() must come right after the block of an if_()")
        self._body[-1] += " else {" + (f"  // {' '.join(comment.split())}" if comment else "")
        self._else_ok = False
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self._emit("}")

    def elect(self, *, comment: str | None = None):
        """`elect { … }`: `elect.sync` with a full mask -- one lane of every warp that reaches it
        (`cute::elect_one_sync()`); a warpgroup runs the body four times."""
        return self._block("elect", comment)

    def per_warp(self, *, comment: str | None = None):
        """`elect { … }` under its old name: one lane of every warp that reaches it."""
        return self._block("elect", comment)

    def first_thread(self, *, comment: str | None = None):
        """`first thread { … }`: one thread, the first of the guarding role's instance (thread 0 of
        the CTA without a role guard) -- CUDA's `if (threadIdx.x == 0)`."""
        return self._block("first thread", comment)

    # ------------------------------------------------------------------ mbarrier operations
    def init(self, bar: Ref | Obj, count: object | None = None, *, comment: str | None = None) -> int:
        cnt = f" count {term(count)}" if count is not None else ""
        return self._emit(f"init {_ref(bar)}{cnt};", comment)

    def inval(self, bar: Ref | Obj, *, comment: str | None = None) -> int:
        return self._emit(f"inval {_ref(bar)};", comment)

    def arrive(self, bar: Ref | Obj, count: object | None = None, *, sem: str | None = None,
               scope: str | None = None, remote: object | None = None, comment: str | None = None) -> int:
        cnt = f" count {term(count)}" if count is not None else ""
        at = f" @ {term(remote)}" if remote is not None else ""
        return self._emit(f"arrive{_quals(sem, scope)} {_ref(bar)}{cnt}{at};", comment)

    def arrive_expect_tx(self, bar: Ref | Obj, bytes: object, *, sem: str | None = None, scope: str | None = None,
                         remote: object | None = None, comment: str | None = None) -> int:
        at = f" @ {term(remote)}" if remote is not None else ""
        return self._emit(f"arrive.expect_tx{_quals(sem, scope)} {_ref(bar)} bytes {term(bytes)}{at};", comment)

    def arrive_drop(self, bar: Ref | Obj, count: object | None = None, *, bytes: object | None = None,
                    comment: str | None = None) -> int:
        cnt = f" count {term(count)}" if count is not None else ""
        tx = f" bytes {term(bytes)}" if bytes is not None else ""
        return self._emit(f"arrive_drop{'.expect_tx' if bytes is not None else ''} {_ref(bar)}{cnt}{tx};", comment)

    def expect_tx(self, bar: Ref | Obj, bytes: object, *, remote: object | None = None,
                  comment: str | None = None) -> int:
        at = f" @ {term(remote)}" if remote is not None else ""
        return self._emit(f"expect_tx {_ref(bar)} bytes {term(bytes)}{at};", comment)

    def complete_tx(self, bar: Ref | Obj, bytes: object, *, remote: object | None = None,
                    comment: str | None = None) -> int:
        at = f" @ {term(remote)}" if remote is not None else ""
        return self._emit(f"complete_tx {_ref(bar)} bytes {term(bytes)}{at};", comment)

    def wait(self, bar: Ref | Obj, parity: object, *, sem: str | None = None, scope: str | None = None,
             comment: str | None = None) -> int:
        return self._emit(f"wait{_quals(sem, scope)} {_ref(bar)} parity {term(parity)};", comment)

    # ------------------------------------------------------------------ barriers
    def syncthreads(self, *, comment: str | None = None) -> int:
        return self._emit("syncthreads;", comment)

    def syncwarp(self, *, comment: str | None = None) -> int:
        return self._emit("syncwarp;", comment)

    def _bar(self, op: str, bar: Ref | Obj | object, count: object | None, comment: str | None) -> int:
        target = _ref(bar) if isinstance(bar, (Ref, Obj)) else term(bar).text
        cnt = f", {term(count)}" if count is not None else ""
        return self._emit(f"{op} {target}{cnt};", comment)

    def bar_sync(self, bar: Ref | Obj | object, count: object | None = None, *, aligned: bool = True,
                 comment: str | None = None) -> int:
        """`bar.sync NAMED;` or `bar.sync ID[, N];`; with ``aligned=False`` the unaligned `barrier.sync`."""
        return self._bar("bar.sync" if aligned else "barrier.sync", bar, count, comment)

    def bar_arrive(self, bar: Ref | Obj | object, count: object | None = None, *, aligned: bool = True,
                   comment: str | None = None) -> int:
        return self._bar("bar.arrive" if aligned else "barrier.arrive", bar, count, comment)

    def cluster_arrive(self, *, relaxed: bool = False, comment: str | None = None) -> int:
        return self._emit("cluster.arrive.relaxed;" if relaxed else "cluster.arrive;", comment)

    def cluster_wait(self, *, comment: str | None = None) -> int:
        return self._emit("cluster.wait;", comment)

    def cluster_sync(self, *, comment: str | None = None) -> int:
        return self._emit("cluster.sync;", comment)

    # ------------------------------------------------------------------ data and async operations
    def read(self, buf: Ref | Obj, *, remote: object | None = None, comment: str | None = None) -> int:
        at = f" @ {term(remote)}" if remote is not None else ""
        return self._emit(f"read {_ref(buf)}{at};", comment)

    def write(self, buf: Ref | Obj, *, remote: object | None = None, comment: str | None = None) -> int:
        at = f" @ {term(remote)}" if remote is not None else ""
        return self._emit(f"write {_ref(buf)}{at};", comment)

    def tma_load(self, buf: Ref | Obj, bar: Ref | Obj, *, bytes: object | None = None,
                 multicast: object | None = None, comment: str | None = None) -> int:
        nbytes = f" bytes {term(bytes)}" if bytes is not None else ""
        mc = f" multicast {term(multicast)}" if multicast is not None else ""
        return self._emit(f"tma.load {_ref(buf)}{nbytes} -> {_ref(bar)}{mc};", comment)

    def tma_store(self, buf: Ref | Obj, *, bytes: object | None = None, comment: str | None = None) -> int:
        nbytes = f" bytes {term(bytes)}" if bytes is not None else ""
        return self._emit(f"tma.store {_ref(buf)}{nbytes};", comment)

    def bulk_commit(self, *, comment: str | None = None) -> int:
        return self._emit("bulk.commit;", comment)

    def bulk_wait_read(self, pending: object = 0, *, comment: str | None = None) -> int:
        return self._emit(f"bulk.wait_read {term(pending)};", comment)

    def wgmma_read(self, buf: Ref | Obj, *, comment: str | None = None) -> int:
        return self._emit(f"wgmma.read {_ref(buf)};", comment)

    def wgmma_commit(self, *, comment: str | None = None) -> int:
        return self._emit("wgmma.commit;", comment)

    def wgmma_wait(self, pending: object = 0, *, comment: str | None = None) -> int:
        return self._emit(f"wgmma.wait {term(pending)};", comment)

    def fence_proxy_async(self, *, comment: str | None = None) -> int:
        return self._emit("fence.proxy.async;", comment)

    def fence_mbarrier_init(self, *, comment: str | None = None) -> int:
        return self._emit("fence.mbarrier_init;", comment)

    def tmem_alloc(self, *, cta_group: object | None = None, cols: object | None = None, dealloc: bool = False,
                   comment: str | None = None) -> int:
        grp = f" cta_group {term(cta_group)}" if cta_group is not None else ""
        col = f" cols {term(cols)}" if cols is not None else ""
        return self._emit(f"tmem.{'dealloc' if dealloc else 'alloc'}{grp}{col};", comment)

    def umma_commit(self, bar: Ref | Obj, *, multicast: object | None = None, cta_group: object | None = None,
                    comment: str | None = None) -> int:
        """`umma.commit` = `tcgen05.commit` (CUTLASS's umma_arrive)."""
        mc = f" multicast {term(multicast)}" if multicast is not None else ""
        grp = f" cta_group {term(cta_group)}" if cta_group is not None else ""
        return self._emit(f"umma.commit {_ref(bar)}{mc}{grp};", comment)

    def op(self, name: str, *operands: object, comment: str | None = None, **clauses: object) -> int:
        """Any operation by its language name, e.g. ``b.op("arrive.relaxed.cluster", full[0], remote=1)``;
        clauses by keyword: count, bytes, parity, multicast, cta_group, cols, target (`->`), remote (`@`)."""
        head, *quals = name.split(".")
        if not _IDENT.match(head):
            raise ValueError(f"operation {name!r} is not a name with qualifiers")
        parts = [head + _quals(*quals)]
        if operands:
            parts.append(", ".join(_ref(o) if isinstance(o, (Ref, Obj)) else term(o).text for o in operands))
        spell = {"target": "->", "remote": "@"}
        for key, value in clauses.items():
            if key not in ("count", "bytes", "parity", "multicast", "cta_group", "cols", "target", "remote"):
                raise ValueError(f"unknown clause {key!r}")
            parts.append(f"{spell.get(key, key)} "
                         f"{_ref(value) if isinstance(value, (Ref, Obj)) else term(value).text}")
        return self._emit(" ".join(parts) + ";", comment)

    # ------------------------------------------------------------------ result
    def build(self, defines: Mapping[str, int] | None = None) -> ir.Protocol:
        """Load the text as the IR (``defines`` override params, like `-D`); raises BuildError on bad input."""
        from .lang import load

        if self._depth:
            raise ValueError("build() inside an open block: close every if_/for_/elect block first")
        text = self.source
        try:
            return load(text, defines or {}, path=self.path)
        except InputError as err:
            raise BuildError(err.diagnostics, text) from None

    def save(self, path: str | Path) -> Path:
        """Save the text as a `.sync` file (diagnostics then carry that file's name)."""
        p = Path(path)
        p.write_text(self.source, encoding="utf-8")
        return p
