"""The diagnostics reference: a section per code, examples that do what they say, `syncverify explain`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import syncverify
from syncverify.cli import main
from syncverify.diagnostics import CODES, InputError
from syncverify.docs import explain, reference, sections

ROOT = Path(__file__).resolve().parent.parent


def test_every_code_has_exactly_one_section_in_order():
    headings = re.findall(r"^## (SV\d{3}) — (.*)$", reference(), re.M)
    assert [code for code, _ in headings] == list(CODES)
    assert {code: title for code, title in headings} == {code: title for code, (title, _) in CODES.items()}
    assert list(sections()) == list(CODES)


@pytest.mark.parametrize("code", list(CODES))
def test_section_has_meaning_example_and_fix(code):
    text = explain(code)
    assert text.startswith(f"## {code} — {CODES[code][0]}\n")
    for part in ("**Meaning.**", "**Example.**", "**Fix.**"):
        assert text.count(part) == 1, part
    assert "```sync" in text or "```console" in text
    assert "\n## " not in text  # one section only


def examples(code: str) -> list[tuple[str, str | None]]:
    """(spec, expected output or None) for each ```sync block of a section."""
    found = re.findall(r"```sync\n(.*?)```\n(?:```text\n(.*?)```\n)?", explain(code), re.S)
    return [(spec, out or None) for spec, out in found]


@pytest.mark.parametrize("code", [c for c in CODES if c.startswith("SV1")])
def test_input_error_examples_report_their_code(code):
    if code in ("SV112", "SV114"):  # a missing file and a bad -D: shown as command lines
        assert "```console" in explain(code) and f"SV{code[2:]}" in explain(code)
        return
    ((spec, expected),) = examples(code)
    with pytest.raises(InputError) as info:
        syncverify.load(spec, path="example.sync")
    diags = info.value.diagnostics
    assert code in {d.code for d in diags}
    if expected is not None:
        assert [f"{d.span.line}:{d.span.column}: {d.code} {d.message}" for d in diags if d.span] == \
            expected.strip().splitlines()


@pytest.mark.parametrize("code", [c for c in CODES if c.startswith("SV7")])
def test_run_level_codes_show_a_command_line(code):
    """SV7xx describe the run, not a protocol: their example is a command and what it prints."""
    assert "```console\n$ syncverify " in explain(code)


@pytest.mark.parametrize("code", [c for c in CODES if not c.startswith(("SV1", "SV7"))])
def test_checker_examples_are_valid_input(code):
    """Examples of the model checker's findings must load: the bug is in the protocol, not the syntax."""
    (spec, _), *_ = examples(code)
    assert syncverify.load(spec, path="example.sync").name


def test_docs_link_is_the_package_file():
    link = ROOT / "docs" / "diagnostics.md"
    assert link.is_symlink()
    assert str(link.readlink()) == "../syncverify/data/diagnostics.md"
    assert link.read_text(encoding="utf-8") == reference()


def test_explain_is_case_insensitive():
    assert explain("sv201") == explain("SV201") == sections()["SV201"]
    with pytest.raises(KeyError):
        explain("SV999")


def test_cli_explain(capsys):
    assert main(["explain", "sv201"]) == 0
    out, _ = capsys.readouterr()
    assert out.strip() == explain("SV201")
    assert out.startswith("## SV201 — deadlock")


def test_cli_explain_unknown_code(capsys):
    assert main(["explain", "SV999"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "unknown code SV999" in err and "Traceback" not in err
