"""The diagnostics reference: a section per code, examples that do what they say, `syncverify explain`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import syncverify
from syncverify.cli import main
from syncverify.diagnostics import CODES, KERNEL_ONLY, InputError
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
    if code in ("SV112", "SV114", "SV119"):  # a missing file, a bad -D, a bad manifest: shown as command lines
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
    """Examples of the model checker's findings must load: the bug is in the protocol, not the syntax.
    A code only kernels can have (KERNEL_ONLY) shows a kernel checked instead."""
    if code in KERNEL_ONLY:
        assert "```console\n$ syncverify check tests/data/ptx/" in explain(code)
        return
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


def test_sv115_precedence_text_matches_the_parser():
    """explain SV115 describes how `k & 1 == 0` parses; the grammar uses C's order, so the text must say
    `k & (1 == 0)` (bitwise looser than comparisons), and the parser must agree with it."""
    text = explain("SV115")
    assert "bind tighter than comparisons" not in text
    assert "`k & (1 == 0)`" in text
    src = "protocol p { param K = 2; param A = K & 1 == 0; param B = (K & 1) == 0; cta threads 32; }"
    proto = syncverify.load(src, path="prec.sync")
    assert proto.param("A") == 0  # 2 & (1 == 0) = 2 & 0
    assert proto.param("B") == 1  # (2 & 1) == 0: the low bit is clear


# ----------------------------------------------------------------------------- samples in README.md and docs/

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(lang: str) -> list[tuple[str, int, str]]:
    """(file name, line, body) of every ```lang block of README.md and docs/."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(rf"^```{lang}\n(.*?)^```$", text, re.S | re.M):
            out.append((path.name, text[:m.start()].count("\n") + 1, m.group(1)))
    return out


def _matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line; `…` inside a line matches any text, a line that is only `…` any number of lines."""
    if not expected:
        return not actual
    head = expected[0]
    if head.strip() == "…":
        return any(_matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    if not actual:
        return False
    pattern = "^" + ".*".join(re.escape(part) for part in head.rstrip().split("…")) + "$"
    return re.match(pattern, actual[0].rstrip()) is not None and _matches(expected[1:], actual[1:])


def _run_console(block: str, cwd: Path) -> list[tuple[str, list[str], list[str]]]:
    """Run each `$ command` of a console block; (command, expected lines, printed lines)."""
    import os
    import subprocess
    import sys

    runs = []
    for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
        command, *expected = chunk.rstrip("\n").split("\n")
        argv = command.split()
        if argv[0] == "syncverify":
            argv = [sys.executable, "-m", "syncverify", *argv[1:]]
        elif argv[0] == "python3":
            argv = [sys.executable, *argv[1:]]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=300)
        runs.append((command, expected, (proc.stdout + proc.stderr).splitlines()))
    return runs


def test_matcher_can_fail():
    assert _matches(["a … c", "…", "z"], ["a b c", "x", "y", "z"])
    assert not _matches(["a … c", "z"], ["a b c", "x", "z"])
    assert not _matches(["a"], ["b"])


@pytest.mark.parametrize("where,line,block", _blocks("console"), ids=lambda v: str(v)[:40])
def test_console_samples_print_what_the_docs_say(where, line, block, tmp_path):
    for name in ("specs", "examples", "kernels", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    for command, expected, printed in _run_console(block, tmp_path):
        assert _matches(expected, printed), f"{where}:{line}: `{command}` printed:\n" + "\n".join(printed)


def _python_samples() -> dict[str, list[str]]:
    by_doc: dict[str, list[str]] = {}
    for where, _, body in _blocks("python"):
        by_doc.setdefault(where, []).append(body)
    return by_doc


def test_the_readme_and_the_api_have_python_samples():
    assert set(_python_samples()) >= {"README.md", "api.md"}


@pytest.mark.parametrize("where", sorted(_python_samples()))
def test_python_samples_run(where, tmp_path, monkeypatch):
    """The ```python blocks of each document, in order, in one namespace per document (a test per document:
    the test workers share them out)."""
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    for body in _python_samples()[where]:
        exec(compile(body, where, "exec"), namespace)  # the documentation's own samples


def _contract() -> dict:
    import json

    (schema,) = [body for where, _, body in _blocks("json") if where == "api.md"]
    return json.loads(schema)


def test_json_reports_follow_the_documented_contract(capsys):
    import json

    import jsonschema

    schema = _contract()
    specs = [str(ROOT / "specs" / n) for n in ("cutlass_ws_ring_per_warp_release.sync", "peer_init_fixed.sync")]
    main(["check", "--format", "json", *specs, "/no/such.sync"])
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema)
    assert {r["verdict"] for r in doc["results"]} == {"violation", "safe", "error"}
    main(["check", "--format", "jsonl", *specs])
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    result_schema = {**schema["$defs"]["result"], "$defs": schema["$defs"]}
    diag_schema = {**schema["$defs"]["diagnostic"], "$defs": schema["$defs"]}
    for r in records:
        body = {k: v for k, v in r.items() if k != "kind"}
        if r["kind"] == "result":
            jsonschema.validate(body, result_schema)
        elif r["kind"] == "diagnostic":
            jsonschema.validate({k: v for k, v in body.items() if k not in ("path", "protocol")}, diag_schema)
    broken = dict(doc, results=[dict(doc["results"][0], verdict="fine")])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_readme_synopsis_names_every_check_option():
    from syncverify.cli import build_parser

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    synopsis = readme.split("## Command line", 1)[1].split("```", 2)[1]
    check = build_parser().check_parser
    options = {s for a in check._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
    assert options and all(o in synopsis for o in options), sorted(o for o in options if o not in synopsis)
