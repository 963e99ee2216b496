"""The CLI runs and the grammar loads under Lark's strict mode."""

from lark import Lark

from syncverify.cli import main
from syncverify.lang.parse import grammar_text


def test_grammar_is_strict_lalr():
    Lark(grammar_text(), parser="lalr", lexer="contextual", strict=True)


def test_missing_file_exits_2(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.sync")]) == 2
    assert "SV112" in capsys.readouterr().out
