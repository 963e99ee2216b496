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

# What each terminal looks like to a user.
_TERMINAL_WORDS = {
    "NAME": "a name", "NUMBER": "a number", "QUAL": "a qualifier like `.release`",
    "SEMICOLON": "`;`", "LBRACE": "`{`", "RBRACE": "`}`", "LSQB": "`[`", "RSQB": "`]`",
    "LPAR": "`(`", "RPAR": "`)`", "COMMA": "`,`", "EQUAL": "`=`", "STAR": "`*`",
    "AT": "`@`", "BANG": "`!`", "MINUS": "`-`", "CMPOP": "a comparison", "ADDOP": "`+` or `-`",
    "MULOP": "`*`, `/` or `%`", "BOROP": "`|`", "XOROP": "`^`", "ANDOP": "`&`", "SHIFTOP": "`<<` or `>>`",
    "$END": "end of file",
}


def _word(terminal: str) -> str:
    if terminal in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[terminal]
    pattern = _parser().get_terminal(terminal).pattern
    if pattern.type == "str":
        return f"`{pattern.value}`"
    return terminal.lower()


@cache
def grammar_text() -> str:
    return resources.files("syncverify.lang").joinpath("spec.lark").read_text(encoding="utf-8")


@cache
def _parser() -> Lark:
    return Lark(grammar_text(), parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=False)


def _expected(tokens: set[str] | frozenset[str]) -> str:
    words = sorted({_word(t) for t in tokens if not t.startswith("__")})
    if len(words) > 8:
        words = [*words[:8], "…"]
    return ", ".join(words)


def _span_at(path: str, line: int, column: int, width: int = 1) -> Span:
    return Span(path, line, column, line, column + max(width, 1))


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
        expected = err.expected
        return make("SV100", f"unexpected end of file; expected {_expected(expected)}",
                    _span_at(path, line, col))
    assert isinstance(err, UnexpectedToken)
    tok: Token = err.token
    found = f"`{tok.value}`" if tok.value else _word(tok.type)
    if "SEMICOLON" in err.expected and tok.start_pos is not None:
        line, col = _end_of_previous_token(text, tok.start_pos)
        if line < (tok.line or 1):  # the statement ended at a line break: the `;` is missing there
            return make("SV100", f"missing `;` at the end of the statement (next comes {found})",
                        _span_at(path, line, col))
    return make("SV100", f"unexpected {found}; expected {_expected(err.expected)}",
                _span_at(path, tok.line or 1, tok.column or 1, len(str(tok.value))))


_COMMENTS = re.compile(r"//[^\n]*|/\*(?:.|\n)*?\*/")


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
        if "SEMICOLON" in err.expected and err.token.type != "$END":
            err.interactive_parser.feed_token(Token("SEMICOLON", ";"))
            err.interactive_parser.feed_token(err.token)
            return True
        return False

    try:
        return _parser().parse(text, on_error=recover), errors
    except UnexpectedInput as err:
        diag = _diagnostic(err, path, text)
        if not errors or errors[-1].span != diag.span:
            errors.append(diag)
    except Exception as err:  # interactive recovery can fail inside lark; never leak a traceback
        if not errors:
            errors.append(make("SV100", f"cannot parse: {err}", _span_at(path, 1, 1)))
    return None, errors
