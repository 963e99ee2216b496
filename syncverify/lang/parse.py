"""Lark parser for `.sync` files and the translation of its errors into SV100 diagnostics.

The grammar ships as package data (spec.lark). Parse errors carry the exact
position, what was found and what was expected, in the vocabulary of the
language (`';'`, `a name`), never Lark's terminal names.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..diagnostics import Diagnostic, InputError, Span, make

MAX_ERRORS = 20
# Nesting limits, checked before anything recursive (the resolver, the engines)
# walks the tree: far beyond any real kernel, far below Python's recursion limit.
MAX_BLOCK_DEPTH = 100
MAX_EXPR_DEPTH = 100
_EXPR_NODES = frozenset({"binop", "or_", "and_", "neg", "not_", "index", "index_all", "cond"})

# What each terminal looks like to a user.
_TERMINAL_WORDS = {
    "NAME": "a name", "NUMBER": "a number", "QUAL": "a qualifier like `.release`",
    "SEMICOLON": "`;`", "LBRACE": "`{`", "RBRACE": "`}`", "LSQB": "`[`", "RSQB": "`]`",
    "LPAR": "`(`", "RPAR": "`)`", "COMMA": "`,`", "EQUAL": "`=`", "STAR": "`*`",
    "AT": "`@`", "BANG": "`!`", "MINUS": "`-`", "EQOP": "`==` or `!=`", "RELOP": "a comparison", "ADDOP": "`+` or `-`",
    "MULOP": "`*`, `/` or `%`", "BOROP": "`|`", "XOROP": "`^`", "ANDOP": "`&`", "SHIFTOP": "`<<` or `>>`",
    "QMARK": "`?`", "COLON": "`:`",
    "$END": "end of file",
}


def terminal_word(parser: Lark, terminal: str, words: dict[str, str] | None = None) -> str:
    """How an error message names one of ``parser``'s terminals: a word from ``words``, the
    literal text of an anonymous or string terminal (`` `;` ``), else the terminal's name."""
    if words and terminal in words:
        return words[terminal]
    if terminal == "$END":
        return "end of file"
    pattern = parser.get_terminal(terminal).pattern
    if pattern.type == "str":
        return f"`{pattern.value}`"
    return terminal.lower()


def _word(terminal: str) -> str:
    return terminal_word(_parser(), terminal, _TERMINAL_WORDS)


@cache
def grammar_text() -> str:
    return resources.files("syncverify.lang").joinpath("spec.lark").read_text(encoding="utf-8")


@cache
def _parser() -> Lark:
    """The LALR parser. Building it costs about half a second (Lark checks the terminals'
    regular expressions for collisions), which every command would pay; Lark's own cache
    keeps the built tables in the temp directory, keyed by a hash of the grammar, the
    options and the Lark version, and rebuilds them when the file is missing or stale."""
    return Lark(grammar_text(), parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=False, cache=True)


def _expected(tokens: set[str] | frozenset[str]) -> str:
    # Kinds of token ("a name") before literal ones ("`;`"), so a cut-off list keeps them.
    words = sorted({_word(t) for t in tokens}, key=lambda w: (w.startswith("`"), w))
    if len(words) > 8:
        words = [*words[:8], "…"]
    return ", ".join(words)


def _span_at(path: str, line: int, column: int, width: int = 1) -> Span:
    return Span(path, line, column, line, column + max(width, 1))


def _accepts(err: UnexpectedInput) -> set[str] | frozenset[str]:
    """The terminals the parser can really take here.

    ``err.expected`` is the LALR state's table row, which state merging makes
    too wide (it may list `;` where a `;` cannot follow); ``accepts()`` tries
    each terminal on a copy of the parser.
    """
    parser = getattr(err, "interactive_parser", None)
    if parser is not None:
        try:
            return parser.accepts()
        except Exception:  # pragma: no cover - fall back to the table row
            pass
    return getattr(err, "expected", None) or set()


def _diagnostic(err: UnexpectedInput, path: str, text: str) -> Diagnostic:
    if isinstance(err, UnexpectedCharacters):
        ch = text[err.pos_in_stream] if err.pos_in_stream < len(text) else ""
        msg = f"unexpected character {ch!r}"
        if err.allowed:
            msg += f"; expected {_expected(err.allowed)}"
        return make("SV100", msg, _span_at(path, err.line, err.column))
    if isinstance(err, UnexpectedEOF) or (isinstance(err, UnexpectedToken) and err.token.type == "$END"):
        lines = text.rstrip().splitlines() or [""]
        line = len(lines)
        col = len(lines[-1]) + 1
        expected = _accepts(err)
        unclosed = _unclosed_brace(text)
        if unclosed is not None and "RBRACE" in expected:
            return make("SV100", f"unexpected end of file: the `{{` at line {unclosed[0]}, column {unclosed[1]} "
                        "is never closed", _span_at(path, line, col))
        return make("SV100", f"unexpected end of file; expected {_expected(expected)}",
                    _span_at(path, line, col))
    assert isinstance(err, UnexpectedToken)
    tok: Token = err.token
    found = f"`{tok.value}`" if tok.value else _word(tok.type)
    expected = _accepts(err)
    if "SEMICOLON" in expected and tok.start_pos is not None:
        line, col = _end_of_previous_token(text, tok.start_pos)
        if line < (tok.line or 1):  # the statement ended at a line break: the `;` is missing there
            return make("SV100", f"missing `;` at the end of the statement (next comes {found})",
                        _span_at(path, line, col))
        if tok.type == "RBRACE":
            return make("SV100", "missing `;` before `}`", _span_at(path, line, col))
    hint = ""
    if tok.type == "EQUAL":
        hint = " (compare with `==`)" if "EQOP" in expected else " (variables are bound with `let NAME = EXPR;`)"
    return make("SV100", f"unexpected {found}; expected {_expected(expected)}{hint}",
                _span_at(path, tok.line or 1, tok.column or 1, len(str(tok.value))))


_COMMENTS = re.compile(r"//[^\n]*|/\*(?:.|\n)*?\*/")


def _unclosed_brace(text: str) -> tuple[int, int] | None:
    """(line, column) of the last `{` that no `}` closes, comments ignored."""
    blanked = _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    opened: list[int] = []
    for m in re.finditer(r"[{}]", blanked):
        if m.group() == "{":
            opened.append(m.start())
        elif opened:
            opened.pop()
    if not opened:
        return None
    pos = opened[-1]
    return blanked.count("\n", 0, pos) + 1, pos - (blanked.rfind("\n", 0, pos) + 1) + 1


def _end_of_previous_token(text: str, pos: int) -> tuple[int, int]:
    """(line, column) just after the last non-blank, non-comment character before ``pos``."""
    blanked = _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text[:pos])
    end = len(blanked.rstrip())
    line = blanked.count("\n", 0, end) + 1
    col = end - (blanked.rfind("\n", 0, end) + 1) + 1
    return line, col


def parse(text: str, path: str) -> Tree:
    """Parse, raising InputError if anything was wrong (see parse_recovering)."""
    tree, errors = parse_recovering(text, path)
    if errors or tree is None:
        raise InputError(errors)
    return tree


def parse_recovering(text: str, path: str) -> tuple[Tree | None, list[Diagnostic]]:
    """Parse `.sync` text. Raises InputError with one SV100 per syntax error found.

    Recovery: a missing `;` is the most common slip, so when `;` would have been
    accepted the parser pretends it was there and goes on, reporting the rest of
    the file's errors in the same run. Other errors stop the parse. Returns the
    tree when the parse completed (possibly after recoveries) and the errors.
    """
    if not text.strip():
        raise InputError([make("SV100", "empty file; expected `protocol NAME { … }`",
                               _span_at(path, 1, 1))])
    errors: list[Diagnostic] = []

    def recover(err: UnexpectedInput) -> bool:
        diag = _diagnostic(err, path, text)
        if errors and errors[-1].span == diag.span:
            return False  # the recovery did not get past this token
        errors.append(diag)
        if len(errors) >= MAX_ERRORS or not isinstance(err, UnexpectedToken):
            return False
        if "SEMICOLON" in _accepts(err) and err.token.type != "$END":
            err.interactive_parser.feed_token(Token("SEMICOLON", ";"))
            err.interactive_parser.feed_token(err.token)
            return True
        return False

    try:
        tree = _parser().parse(text, on_error=recover)
    except UnexpectedInput as err:
        diag = _diagnostic(err, path, text)
        if not errors or errors[-1].span != diag.span:
            errors.append(diag)
    except Exception as err:  # interactive recovery can fail inside lark; never leak a traceback
        if not errors:
            errors.append(make("SV100", f"cannot parse: {err}", _span_at(path, 1, 1)))
    else:
        too_deep = _nesting_errors(tree, path)
        if too_deep:
            return None, errors + too_deep
        return tree, errors
    return None, errors


def _nesting_errors(tree: Tree, path: str) -> list[Diagnostic]:
    """SV116 / SV115 for blocks / expressions nested beyond the limits (an iterative walk)."""
    found: dict[str, Diagnostic] = {}
    stack: list[tuple[Tree, int, int]] = [(tree, 0, 0)]
    while stack and len(found) < 2:
        node, blocks, exprs = stack.pop()
        if node.data == "block":
            blocks += 1
        if node.data in _EXPR_NODES:
            exprs += 1
        meta = node.meta
        line, col = (1, 1) if getattr(meta, "empty", True) else (meta.line, meta.column)
        if blocks > MAX_BLOCK_DEPTH and "block" not in found:
            found["block"] = make("SV116", f"blocks nested more than {MAX_BLOCK_DEPTH} deep (an `else if` counts "
                                  "as one more); flatten the protocol", _span_at(path, line, col))
            continue
        if exprs > MAX_EXPR_DEPTH and "expr" not in found:
            found["expr"] = make("SV115", f"expression nested more than {MAX_EXPR_DEPTH} deep; split it with `let`",
                                 _span_at(path, line, col))
            continue
        for child in reversed(node.children):
            if isinstance(child, Tree):  # an `else if` nests like a block
                chained = node.data in _IFS and child.data in _IFS
                stack.append((child, blocks + chained, exprs))
    return sorted(found.values(), key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))


_IFS = ("if_stmt", "probe_if")  # `if EXPR` and `if try_wait B parity P` (a branch on a probe)
