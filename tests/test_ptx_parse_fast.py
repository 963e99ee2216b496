"""The PTX parse's two shortcuts keep what the parse gives: a debug section's lines of numbers lexed as
one token each (ptx_sections.lark), and positions read from the first token of an instruction or a
declaration instead of propagated through the whole tree."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from lark.exceptions import UnexpectedInput

from syncverify.ptx.parse import PtxError, _parse_tree, _parser, parse_ptx

DATA = Path(__file__).parent / "data" / "ptx"

_KERNEL = (".version 8.0\n.target sm_90a\n"
           ".global .align 1 .b8 table[3] = {1, 2, 3};\n"
           ".visible .entry k()\n{\n"
           "  .reg .pred %p<2>;\n"
           "  @%p1 bra $L__BB0_1;\n"
           "\t@!%p1   bra $L__BB0_1;\n"
           "$L__BB0_1:\n"
           "  ret;\n}\n")

# debug sections as nvcc and Triton's LLVM write them, and layouts the one-token line does not fit
_SECTION = ("\t.section\t.debug_str\n\t{\n$L__info_string0:\n"
            ".b8 95,90,78,0x1f,017,-3,7U\n"    # lines of numbers: one token
            "\n\t.b16 8 , 9\n"
            ".b8 1, 2,\n3\n"                   # continued on the next line: ptx.lark's tokens
            ".b8 4\n, 5\n"                     # a comma on the next line: no token fits, parsed again
            ".b32 .debug_abbrev // a comment\n"
            ".b8 7 // a comment\n"
            ".b64 $L__func_begin0\n"
            "\t{\n.b8 0\n\t}\n\t}\n")


def _section_tokens(tree) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(t) for t in tree.scan_values(lambda v: getattr(v, "type", "") == "SECTION_DATA")]


def test_positions_are_those_of_each_instructions_first_character():
    mod = parse_ptx(_KERNEL, "k.ptx")
    (fn,) = mod.entries()
    assert [(i.opcode, i.guard_neg, i.line, i.column) for i in fn.body] == [
        ("bra", False, 7, 3), ("bra", True, 8, 2), ("ret", False, 10, 3)]
    assert fn.line == 4 and mod.variables[0].line == 3


@pytest.mark.parametrize("name", ["ring.ptx", "triton/fused_attention_s3.ptx"])
def test_every_instruction_starts_at_its_position(name):
    """An instruction's line:col is where its guard or its opcode is written (what a refusal's caret shows)."""
    mod = parse_ptx((DATA / name).read_text(encoding="utf-8"), name)
    body = [i for fn in mod.entries() for i in fn.body or ()]
    assert len(body) > 100
    for ins in body:
        at = mod.source_line(ins.line)[ins.column - 1:]
        assert at.startswith("@" if ins.guard else ins.opcode), (ins, at)


def test_a_section_line_of_numbers_is_one_token_and_other_layouts_parse_as_before():
    text = _KERNEL + _SECTION
    assert _section_tokens(_parser(sections=True).parse(_KERNEL + _SECTION.replace(".b8 4\n, 5\n", ""))) == [
        ".b8 95,90,78,0x1f,017,-3,7U\n\n\t.b16 8 , 9", ".b8 7", ".b8 0"]
    with pytest.raises(UnexpectedInput):  # the comma on the next line: only ptx.lark takes it
        _parser(sections=True).parse(text)
    tree = _parse_tree(text)
    assert _section_tokens(tree) == [] and tree == _parser().parse(text)
    assert parse_ptx(text, "k.ptx").entries()[0].body == parse_ptx(_KERNEL, "k.ptx").entries()[0].body


@pytest.mark.parametrize("bad, where", [
    (".b8 95,90,78 x\n\t}\n", (14, 14)),
    (".b8 95,09,78\n\t}\n", (14, 9)),
    (".b8 95,90,78\n", (14, 11)),          # the section never closed: at the last number
])
def test_bad_section_data_is_reported_where_ptx_lark_reports_it(bad, where):
    text = _KERNEL + "\t.section\t.debug_str\n\t{\n" + bad
    with pytest.raises(PtxError) as err:
        parse_ptx(text, "bad.ptx")
    assert (err.value.line, err.value.column) == where
    assert "section_data" not in err.value.message and "dirname" in err.value.message


def test_a_cutlass_kernels_debug_strings_become_one_token_a_string():
    """The reason for the token: the ping-pong GEMM's 3,129 lines of `.debug_str` bytes were 228k tokens; the
    lines of each string (up to its next label) are one token now, and the tokens hold every line."""
    text = gzip.decompress((DATA / "sm90_gemm_pingpong_1x2.ptx.gz").read_bytes()).decode()
    lines = [ln for ln in text.splitlines() if ln.startswith(".b8 ")]
    strings = [ln for ln in text.splitlines() if ln.startswith("$L__info_string")]
    assert len(lines) > 2500 and len(strings) > 300
    tokens = _section_tokens(_parse_tree(text))
    assert len(tokens) == len(strings)
    assert [ln for tok in tokens for ln in tok.splitlines()] == lines

