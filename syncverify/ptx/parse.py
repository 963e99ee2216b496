"""PTX front end: the Lark grammar (ptx.lark) and the tree turned into a flat, typed module.

Function bodies are flattened: nested `{ … }` blocks (inline asm wraps its
instructions in one, with block-local `.reg` declarations) become one list of
instructions whose block-local registers are renamed apart, and labels become
indices into that list. Every instruction keeps its PTX position and the CUDA
source position of the `.loc` directive in force, so a refusal or a finding
can name both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..lang.parse import terminal_word


class PtxError(Exception):
    """Bad or unsupported input, located in a file: printed as `file:line:col: message` with a caret."""

    def __init__(self, path: str, line: int, column: int, message: str, source_line: str = "",
                 note: str = ""):
        super().__init__(message)
        self.path, self.line, self.column, self.message = path, line, column, message
        self.source_line, self.note = source_line, note

    def render(self) -> str:
        out = f"{self.path}:{self.line}:{self.column}: error: {self.message}"
        if self.source_line:
            out += f"\n  {self.source_line.rstrip()}\n  {' ' * (self.column - 1)}^"
        if self.note:
            out += f"\n  {self.note}"
        return out


@dataclass(frozen=True, slots=True)
class SrcLoc:
    """A CUDA source position from `.loc FILE LINE COL`, with the call sites it was inlined at."""

    file: str
    line: int
    column: int
    inlined_at: tuple[tuple[str, int, int], ...] = ()
    # the call sites above the first, where nvcc gives them through an earlier `.loc` at that site (_loc):
    # where a finding is placed (frames.py); not part of the position's identity (statements unrolled from
    # one line are one line, roll.py)
    outer: tuple[tuple[str, int, int], ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def _source_file(name: str, ptx_path: str) -> str:
    """The CUDA file `.file` names, or the file of that name beside the PTX when the PTX was moved."""
    if os.path.exists(name):
        return name
    beside = os.path.join(os.path.dirname(ptx_path), os.path.basename(name))
    return beside if os.path.exists(beside) else name


# ---- operands -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Name:
    """A register, special register, symbol or label, by name."""

    name: str


@dataclass(frozen=True, slots=True)
class NegName:
    name: str


@dataclass(frozen=True, slots=True)
class Imm:
    value: int


@dataclass(frozen=True, slots=True)
class FloatImm:
    text: str


@dataclass(frozen=True, slots=True)
class Pair:
    """`%r7|%p1`: a destination register and a destination predicate."""

    first: str
    second: str


@dataclass(frozen=True, slots=True)
class Addr:
    """`[base+offset]`; base None for an absolute address."""

    base: str | None
    offset: int


@dataclass(frozen=True, slots=True)
class Vec:
    items: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class TensorAddr:
    """`[tensormap, {c0, c1, …}]`: a tensor map and the coordinates of a tensor copy."""

    base: str
    coords: tuple[Operand, ...]


Operand = Name | NegName | Imm | FloatImm | Pair | Addr | Vec | TensorAddr


def operand_registers(op: Operand) -> set[str]:
    """The registers an operand names: a register (negated or not), both of a `%r|%p` pair, an address's
    base, a vector's register items. (A tensor copy's coordinates are not its registers here: callers that
    follow them ask for them.)"""
    if isinstance(op, Name):
        return {op.name}
    if isinstance(op, Pair):
        return {op.first, op.second}
    if isinstance(op, Vec):
        return {x.name for x in op.items if isinstance(x, Name)}
    if isinstance(op, Addr) and op.base is not None:
        return {op.base}
    name = getattr(op, "name", None)
    return {name} if isinstance(name, str) else set()


@dataclass(frozen=True, slots=True)
class Instr:
    """One instruction: `@guard opcode.mods operands;` at PTX line:col, CUDA `src` if known."""

    opcode: str
    operands: tuple[Operand, ...]
    guard: str | None
    guard_neg: bool
    line: int
    column: int
    src: SrcLoc | None
    # the opcode split once, `bar` and `("sync", "aligned")`: extraction asks at every step of every warp
    base: str = field(init=False, repr=False, compare=False)
    mods: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        base, *mods = self.opcode.split(".")
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "mods", tuple(mods))


@dataclass(frozen=True, slots=True)
class VarDecl:
    """A `.global/.shared/.const/.local` variable; `init` holds its initializer as bytes if given."""

    space: str
    name: str
    elem_bytes: int
    dims: tuple[int | None, ...]
    align: int
    init: bytes | None
    line: int

    @property
    def size(self) -> int | None:
        n = self.elem_bytes
        for d in self.dims:
            if d is None:
                return None
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: str
    size: int
    align: int


@dataclass(frozen=True)
class Function:
    name: str
    kind: str  # ".entry" or ".func"
    params: tuple[Param, ...]
    body: tuple[Instr, ...] | None
    labels: dict[str, int]
    registers: frozenset[str]
    local_vars: tuple[VarDecl, ...]
    directives: dict[str, tuple[int, ...]]
    line: int


@dataclass(frozen=True)
class Module:
    path: str
    text: str
    version: str
    target: tuple[str, ...]
    files: dict[int, str]
    variables: tuple[VarDecl, ...]
    functions: tuple[Function, ...]
    lines: tuple[str, ...] = field(repr=False, default=())

    def entries(self) -> list[Function]:
        return [f for f in self.functions if f.kind == ".entry" and f.body is not None]

    def source_line(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""


# ---- parsing ---------------------------------------------------------------------------------------

@cache
def _parser(sections: bool = False) -> Lark:
    """LALR with the contextual lexer: an opcode, a register and a directive are told apart by position.

    With ``sections``, ptx_sections.lark's one token per line of a debug section's numbers: the parse that
    runs first. Without, ptx.lark alone: the language and the syntax errors. Positions are not propagated
    through the tree (half of the parse's time went there): `_first_token` finds those that are read."""
    package = resources.files("syncverify.ptx")
    grammar = package.joinpath("ptx.lark").read_text(encoding="utf-8")
    if sections:
        grammar += package.joinpath("ptx_sections.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="contextual", maybe_placeholders=False, cache=True)


def _parse_tree(text: str) -> Tree:
    """The tree of ``text``: parsed with debug sections' lines as tokens, and where that fails, with
    ptx.lark alone, whose tree or error it is (a line of numbers laid out unusually, bad PTX)."""
    try:
        return _parser(sections=True).parse(text)
    except UnexpectedInput:
        return _parser().parse(text)


_TYPE_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
               "b32": 4, "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8,
               "pred": 1, "b128": 16, "f16x2": 4, "bf16x2": 4}


def _int(tok: Token | str) -> int:
    text = str(tok).rstrip("U")
    neg = text.startswith("-")
    digits = text[1:] if neg else text
    if digits.lower().startswith("0x"):
        v = int(digits, 16)
    elif len(digits) > 1 and digits.startswith("0"):
        v = int(digits, 8)
    else:
        v = int(digits)
    return -v if neg else v


def _first_token(node: Tree) -> Token:
    """Where a declaration or an instruction starts: its first token (every such rule begins with a kept
    token, or with a guard that does, `GUARD`). Read from the tokens rather than from Lark's
    `propagate_positions`, which gave every node of the tree a position and took half of the parse."""
    first = node.children[0]
    while isinstance(first, Tree):
        first = first.children[0]
    return first


# the modules of the last texts parsed: a kernel's PTX is read again by each step of one command (the host
# program's launch, then extraction) and by each check of a sweep or a test, and a CUTLASS sm100 kernel's takes
# seconds to parse; a Module is frozen and nothing writes into its tables, so one is handed out again
_PARSED: dict[str, Module] = {}
_PARSED_KEPT = 4


def parse_ptx(text: str, path: str) -> Module:
    """Parse PTX text into a :class:`Module`; bad input raises :class:`PtxError` with its position."""
    kept = _PARSED.get(text)
    if kept is not None:
        return kept if kept.path == path else replace(kept, path=path)
    lines = tuple(text.splitlines())
    try:
        tree = _parse_tree(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, path, lines) from None
    module = _Builder(path, text, lines).module(tree)
    while len(_PARSED) >= _PARSED_KEPT:
        del _PARSED[next(iter(_PARSED))]
    _PARSED[text] = module
    return module


def parse_ptx_file(path: str) -> Module:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as err:
        raise PtxError(path, 1, 1, f"cannot read {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise PtxError(path, 1, 1, f"{path} is not UTF-8 text; is it a PTX file?") from None
    return parse_ptx(text, path)


def _syntax_error(err: UnexpectedInput, path: str, lines: tuple[str, ...]) -> PtxError:
    line, col = getattr(err, "line", 1) or 1, getattr(err, "column", 1) or 1
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    if isinstance(err, UnexpectedCharacters):
        msg = f"unexpected character {src[col - 1:col]!r}" if src else "unexpected character"
    elif isinstance(err, UnexpectedEOF):
        msg = "unexpected end of file (a `}` or `;` is missing)"
    elif isinstance(err, UnexpectedToken):
        expected = sorted({terminal_word(_parser(), t) for t in err.expected})[:6]
        msg = f"unexpected `{err.token!s:.40}`; expected one of {', '.join(expected)}"
    else:  # pragma: no cover - Lark's other error kinds carry the same position
        msg = str(err).splitlines()[0]
    return PtxError(path, line, col, f"PTX syntax: {msg}", src)


class _Builder:
    """Walks the Lark tree once; keeps the `.loc` in force while flattening a body."""

    def __init__(self, path: str, text: str, lines: tuple[str, ...]):
        self.path, self.text, self.lines = path, text, lines
        self.files: dict[int, str] = {}
        self.version, self.target = "", ()

    def module(self, tree: Tree) -> Module:
        variables: list[VarDecl] = []
        functions: list[Function] = []
        # .file directives may come after the functions that use them: collect them first
        for item in tree.children:
            if isinstance(item, Tree) and item.data == "file_dir":
                self._file(item)
        for item in tree.children:
            if not isinstance(item, Tree):
                continue
            if item.data == "version":
                self.version = str(item.children[0])
            elif item.data == "target":
                self.target = tuple(str(c) for c in item.children)
            elif item.data == "var_decl":
                variables.append(self._var(item))
            elif item.data == "function":
                functions.append(self._function(item))
        return Module(self.path, self.text, self.version, self.target, dict(self.files), tuple(variables),
                      tuple(functions), self.lines)

    def _file(self, node: Tree) -> None:
        num, name = node.children[0], node.children[1]
        self.files[_int(num)] = str(name)[1:-1]

    def _attrs(self, nodes: list[Tree]) -> tuple[str, int]:
        type_, align = "b8", 1
        for a in nodes:
            word = str(a.children[0])[1:]
            if word == "align" and len(a.children) > 1:
                align = _int(a.children[1])
            elif word in _TYPE_BYTES or word.startswith("v"):
                if word in _TYPE_BYTES:
                    type_ = word
        return type_, align

    def _var(self, node: Tree) -> VarDecl:
        space = ""
        name = ""
        attrs: list[Tree] = []
        dims: list[int | None] = []
        init: Tree | Token | None = None
        for c in node.children:
            if isinstance(c, Token) and c.type == "SPACE":
                space = str(c)[1:]
            elif isinstance(c, Token) and c.type == "NAME":
                name = str(c)
            elif isinstance(c, Tree) and c.data == "attr":
                attrs.append(c)
            elif isinstance(c, Tree) and c.data == "array_dim":
                dims.append(_int(c.children[0]) if c.children else None)
            elif not (isinstance(c, Token) and c.type == "LINKAGE"):
                init = c
        type_, align = self._attrs(attrs)
        elem = _TYPE_BYTES.get(type_, 1)
        data = self._init_bytes(init, elem) if init is not None else None
        return VarDecl(space, name, elem, tuple(dims), align, data, _first_token(node).line)

    def _init_bytes(self, init: Tree | Token, elem: int) -> bytes | None:
        """Initializer values flattened to little-endian bytes; None if a value is symbolic."""
        flat: list[int] = []

        def walk(v: Tree | Token) -> bool:
            if isinstance(v, Token) and v.type == "NUMBER":
                flat.append(_int(v))
                return True
            if isinstance(v, Tree) and v.data == "init_list":
                return all(walk(x) for x in v.children)
            return False

        if not walk(init):
            return None
        return b"".join((x & ((1 << (8 * elem)) - 1)).to_bytes(elem, "little") for x in flat)

    def _function(self, node: Tree) -> Function:
        kind, name = "", ""
        params: list[Param] = []
        directives: dict[str, tuple[int, ...]] = {}
        body: Tree | None = None
        for c in node.children:
            if isinstance(c, Token) and c.type == "FUNC_KIND":
                kind = str(c)
            elif isinstance(c, Token) and c.type == "NAME":
                name = str(c)
            elif isinstance(c, Tree) and c.data == "params":
                params = [self._param(p) for p in c.children if isinstance(p, Tree)]
            elif isinstance(c, Tree) and c.data == "perf_dir":
                directives[str(c.children[0])] = tuple(_int(x) for x in c.children[1:])
            elif isinstance(c, Tree) and c.data == "block":
                body = c
        line = _first_token(node).line
        if body is None:
            return Function(name, kind, tuple(params), None, {}, frozenset(), (), directives, line)
        flat = _Flattener(self)
        flat.block(body, {})
        return Function(name, kind, tuple(params), tuple(flat.instrs), flat.labels, frozenset(flat.registers),
                        tuple(flat.vars), directives, line)

    def _param(self, node: Tree) -> Param:
        attrs = [c for c in node.children if isinstance(c, Tree) and c.data == "attr"]
        dims = [_int(c.children[0]) for c in node.children
                if isinstance(c, Tree) and c.data == "array_dim" and c.children]
        name = next(str(c) for c in node.children if isinstance(c, Token) and c.type == "NAME")
        type_, align = self._attrs(attrs)
        size = _TYPE_BYTES.get(type_, 8)
        for d in dims:
            size *= d
        return Param(name, type_, size, max(align, 1))


class _Flattener:
    """Flattens nested blocks; a block-local `.reg` is renamed `NAME#k` so inline asm blocks do not clash."""

    def __init__(self, b: _Builder):
        self.b = b
        self.instrs: list[Instr] = []
        self.labels: dict[str, int] = {}
        self.registers: set[str] = set()
        self.vars: list[VarDecl] = []
        self.loc: SrcLoc | None = None
        self.site_chains: dict[tuple[str, int, int], tuple[tuple[str, int, int], ...]] = {}
        self.blocks = 0

    def block(self, node: Tree, outer: dict[str, str]) -> None:
        scope = dict(outer)
        depth_tag = self.blocks
        self.blocks += 1
        if depth_tag:  # labels of a nested block (inline asm's `LAB_WAIT:`) are local to it
            for st in node.children:
                if isinstance(st, Tree) and st.data == "label":
                    name = str(st.children[0])[:-1]
                    scope[name] = f"{name}#{depth_tag}"
        for st in node.children:
            if not isinstance(st, Tree):
                continue
            kind = st.data
            if kind == "reg_decl":
                for rn in st.children:
                    if isinstance(rn, Tree) and rn.data == "reg_name":
                        self._reg(rn, scope, depth_tag, top=not outer and depth_tag == 0)
            elif kind == "var_decl":
                v = self.b._var(st)
                self.vars.append(v)
            elif kind == "label":
                name = str(st.children[0])[:-1]
                self.labels[scope.get(name, name)] = len(self.instrs)
            elif kind == "loc":
                self._loc(st)
            elif kind == "block":
                self.block(st, scope)
            elif kind == "instr":
                self.instrs.append(self._instr(st, scope))

    def _reg(self, rn: Tree, scope: dict[str, str], tag: int, top: bool) -> None:
        base = str(rn.children[0])
        if len(rn.children) > 1:  # %r<236>: %r0 .. %r235
            for k in range(_int(rn.children[1])):
                self.registers.add(f"{base}{k}")
            return
        renamed = base if top else f"{base}#{tag}"
        scope[base] = renamed
        self.registers.add(renamed)

    def _loc(self, st: Tree) -> None:
        nums = [c for c in st.children if isinstance(c, Token) and c.type == "NUMBER"]
        f, ln, col = (_int(x) for x in nums[:3])
        chain: list[tuple[str, int, int]] = []
        if len(nums) >= 6:
            fi, li, ci = (_int(x) for x in nums[3:6])
            site = (self.b.files.get(fi, f"file{fi}"), li, ci)
            # nvcc names one call site per `.loc`; the site's own chain is that of the latest `.loc` at it
            # (`.loc 2 104 5 … inlined_at 2 161 9` after `.loc 2 161 9 … inlined_at 1 24 5`): the whole chain
            chain = [site, *self.site_chains.get(site, ())]
        # `.loc 1 0 3` is the compiler's "no line": keep the previous one
        if ln == 0:
            return
        self.loc = SrcLoc(self.b.files.get(f, f"file{f}"), ln, col, tuple(chain[:1]), tuple(chain[1:]))
        if chain and len(chain) < 64:
            self.site_chains[(self.loc.file, ln, col)] = tuple(chain)

    def _instr(self, st: Tree, scope: dict[str, str]) -> Instr:
        guard, neg = None, False
        opcode = ""
        ops: list[Operand] = []
        for c in st.children:
            if isinstance(c, Tree) and c.data == "guard":
                neg = any(isinstance(x, Token) and x.type == "NEG" for x in c.children)
                guard = scope.get(str(c.children[-1]), str(c.children[-1]))
            elif isinstance(c, Token) and c.type == "OPCODE":
                opcode = str(c)
            elif isinstance(c, Tree):
                ops.append(self._operand(c, scope))
        first = _first_token(st)
        return Instr(opcode, tuple(ops), guard, neg, first.line, first.column, self.loc)

    def _operand(self, c: Tree, scope: dict[str, str]) -> Operand:
        def nm(t: Token) -> str:
            return scope.get(str(t), str(t))

        kind = c.data
        if kind == "name":
            return Name(nm(c.children[0]))
        if kind == "negname":
            return NegName(nm(c.children[1]))
        if kind == "number":
            return Imm(_int(c.children[0]))
        if kind == "float":
            return FloatImm(str(c.children[0]))
        if kind == "pair":
            return Pair(nm(c.children[0]), nm(c.children[1]))
        if kind == "vector":
            return Vec(tuple(self._operand(x, scope) for x in c.children if isinstance(x, Tree)))
        if kind == "address":
            base = nm(c.children[0])
            off = 0
            if len(c.children) > 1:
                off = _int(c.children[-1])
                if str(c.children[1]) == "-":
                    off = -off
            return Addr(base, off)
        if kind == "tensor_address":
            return TensorAddr(nm(c.children[0]), tuple(self._operand(x, scope) for x in c.children[1:]
                                                       if isinstance(x, Tree)))
        if kind == "abs_address":
            return Addr(None, _int(c.children[0]))
        raise AssertionError(kind)  # pragma: no cover - the grammar has no other operand
