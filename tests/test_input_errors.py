"""Every input error (SV100–SV118): the exact `file:line:col: SVnnn message`, exit code 2, no traceback.

Each case is run through the CLI (`syncverify check FILE`), whose text report
prints every diagnostic as `path:line:col: CODE message`, the source line and
a caret under the reported column; the same diagnostics come back from the
API as `InputError.diagnostics`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import syncverify
from syncverify.cli import main
from syncverify.diagnostics import CODES, InputError
from syncverify.lang.load import MAX_SOURCE_BYTES
from syncverify.lang.parse import MAX_BLOCK_DEPTH, MAX_ERRORS, MAX_EXPR_DEPTH

HEADER = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>SV\d{3}) (?P<msg>.*)$")


@dataclass
class Printed:
    line: int
    col: int
    code: str
    message: str
    source: str | None  # the source line as printed (without the 4-space indent)
    caret: str | None  # the caret line as printed (without the 4-space indent)

    def __str__(self) -> str:
        return f"{self.line}:{self.col}: {self.code} {self.message}"


def printed(out: str, path: str) -> list[Printed]:
    """Parse the text report's diagnostics for ``path``."""
    lines = out.splitlines()
    found: list[Printed] = []
    for n, text in enumerate(lines):
        m = HEADER.match(text)
        if not m:
            continue
        assert m["path"] == path, text
        source = caret = None
        if n + 2 < len(lines) and lines[n + 2].lstrip().startswith("^"):
            source, caret = lines[n + 1][4:], lines[n + 2][4:]
        found.append(Printed(int(m["line"]), int(m["col"]), m["code"], m["msg"], source, caret))
    return found


def run_check(tmp_path: Path, capsys, text: str | bytes, *args: str, name: str = "spec.sync") -> tuple[int, str]:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    rc = main(["check", str(path), *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out


H = """\
protocol p {
  cta threads 256;
  role prod = warp 0;
  role cons = warpgroup 1;
  smem tile[2] bytes 1024;
  mbarrier full[2] count 1;
"""  # the case's own lines start at line 7

CLUSTER2 = "protocol p {\n  cluster 2;\n  cta threads 128;\n  mbarrier m count 1;\n"  # cases start at line 5

CASES: dict[str, tuple[str, list[str]]] = {
    # SV100: syntax
    "missing-semicolons": ("protocol p {\n  cta threads 128\n  mbarrier m count 1\n  arrive m\n}\n", [
        "2:18: SV100 missing `;` at the end of the statement (next comes `mbarrier`)",
        "3:21: SV100 missing `;` at the end of the statement (next comes `arrive`)",
        "4:11: SV100 missing `;` at the end of the statement (next comes `}`)",
    ]),
    "missing-semicolons-between-operations": ("protocol p {\n  cta threads 128;\n  syncwarp\n  syncwarp\n}\n", [
        "3:11: SV100 missing `;` at the end of the statement (next comes `syncwarp`)",
        "4:11: SV100 missing `;` at the end of the statement (next comes `}`)",
    ]),
    "missing-semicolon-before-brace": (H + "  syncthreads }\n", ["7:14: SV100 missing `;` before `}`"]),
    "unclosed-brace": (H + "  if prod {\n    arrive full[0];\n", [
        "8:20: SV100 unexpected end of file: the `{` at line 7, column 11 is never closed"]),
    "stray-character": (H + "  wait full[0] parity 0 $;\n}\n", [
        "7:25: SV100 unexpected character '$'; expected a comparison, `&&`, `&`, `)`, `*`, `/` or `%`, "
        "`+` or `-`, `,`, `->`, …"]),
    "assignment-without-let": (H + "  x = 3;\n}\n", [
        "7:5: SV100 unexpected `=`; expected a name, a number, a qualifier like `.release`, `!`, `(`, `->`, `-`, "
        "`;`, … (variables are bound with `let NAME = EXPR;`)"]),
    "assignment-in-condition": (H + "  if k = 1 { }\n}\n", [
        "7:8: SV100 unexpected `=`; expected a comparison, `&&`, `&`, `*`, `/` or `%`, `+` or `-`, `<<` or `>>`, "
        "`==` or `!=`, `?`, … (compare with `==`)"]),
    "warp-with-range": (H + "  role r = warp 2..3;\n}\n", [
        "7:12: SV100 `warp` takes one index; use `warps A..B` for a range"]),
    "warps-without-range": (H + "  role r = warps 2;\n}\n", ["7:12: SV100 `warps` takes a range `A..B`"]),
    "no-protocol": ("cta threads 128;\n", ["1:1: SV100 unexpected `cta`; expected `protocol`"]),
    "empty-file": ("", ["1:1: SV100 empty file; expected `protocol NAME { … }`"]),
    "blank-file": ("\n  // only a comment\n\n", [
        "2:20: SV100 unexpected end of file; expected `protocol`"]),
    # SV101: unknown names
    "unknown-param": ("protocol p {\n  param STAGES = 2;\n  cta threads 32;\n  mbarrier m[STAGE] count 1;\n}\n", [
        "4:14: SV101 unknown name `STAGE`; did you mean `STAGES`?"]),
    "unknown-barrier": (H + "  arrive ful[0];\n}\n", ["7:10: SV101 unknown mbarrier `ful`; did you mean `full`?"]),
    "unknown-buffer": (H + "  read tiles[0];\n}\n", ["7:8: SV101 unknown buffer `tiles`; did you mean `tile`?"]),
    "unknown-role": (H + "  if produce { }\n}\n", ["7:6: SV101 unknown name `produce`; did you mean `prod`?"]),
    "i-outside-array": (H + "  role r = warp i;\n}\n", [
        "7:17: SV101 unknown name `i`; `i` is the element index, only inside the declaration of an array "
        "(`role r[2] = warp i;`)"]),
    # SV102: duplicates
    "duplicate-declaration": (H + "  smem full bytes 16;\n}\n", [
        "7:8: SV102 `full` is already declared (as an mbarrier at line 6)"]),
    "duplicate-let": (H + "  let k = 1;\n  let k = 2;\n}\n", [
        "8:7: SV102 `k` is already declared; pick another name for the variable"]),
    "builtin-name": (H + "  for cta in 0..2 { }\n}\n", [
        "7:7: SV102 `cta` is a built-in name; pick another name for the variable"]),
    "builtin-let": (H + "  let instance = 2;\n}\n", [
        "7:7: SV102 `instance` is a built-in name; pick another name for the variable"]),
    # `i` is the element index of array declarations: a declared name may not take it (a variable may)
    "builtin-i": (H + "  param i = 2;\n}\n", ["7:9: SV102 `i` is a built-in name and cannot be declared"]),
    # SV103: roles
    "overlapping-roles": (H + "  role more = threads 16..48;\n}\n", [
        "7:3: SV103 roles `prod` and `more` overlap at thread 16"]),
    "role-beyond-cta": (H + "  role late = warpgroup 2;\n}\n", [
        "7:3: SV103 role `late` covers threads 256..383, beyond the CTA's 256 threads"]),
    "role-array-overlap": (H + "  role w[2] = warp 2;\n}\n", [
        "7:3: SV103 roles `w[0]` and `w[1]` overlap at thread 64"]),
    "empty-role": (H + "  role none = warps 3..3;\n}\n", ["7:15: SV103 role `none` is empty (warps 3..3)"]),
    "negative-role": (H + "  role neg = thread -1;\n}\n", [
        "7:14: SV103 role `neg` starts at thread -1; indices start at 0"]),
    # SV104: indices and array sizes
    "index-out-of-range": (H + "  read tile[2];\n}\n", ["7:13: SV104 index 2 is out of range for `tile[2]`"]),
    "negative-index": (H + "  arrive full[-1];\n}\n", ["7:15: SV104 index -1 is out of range for `full[2]`"]),
    "array-without-index": (H + "  arrive full;\n}\n", ["7:10: SV104 `full` is an array of 2; give an index"]),
    "init-array-without-index": (H + "  init full;\n}\n", [
        "7:8: SV104 `full` is an array of 2; give an index (or `full[*]` for every element)"]),
    "index-on-scalar": (H + "  mbarrier s count 1;\n  arrive s[0];\n}\n", ["8:10: SV104 `s` is not an array"]),
    "zero-size-array": (H + "  smem z[0] bytes 16;\n}\n", ["7:10: SV104 array size 0 is outside 1..4096"]),
    # SV105: counts and tx bytes
    "count-zero": (H + "  mbarrier z count 0;\n}\n", [
        "7:20: SV105 mbarrier `z` count 0 is outside 1..1048575 (2^20-1)"]),
    "count-2^20": (H + "  mbarrier z count 1 << 20;\n}\n", [
        "7:20: SV105 mbarrier `z` count 1048576 is outside 1..1048575 (2^20-1)"]),
    "init-count-zero": (H + "  init full[0] count 0;\n}\n", [
        "7:22: SV105 init count 0 is outside 1..1048575 (2^20-1)"]),
    "init-without-count": (H + "  mbarrier z;\n  init z;\n}\n", [
        "8:3: SV105 `init z` needs `count N`: the declaration gives none"]),
    "arrive-count-zero": (H + "  arrive full[0] count 0;\n}\n", [
        "7:24: SV105 arrive count 0 is outside 1..1048575 (2^20-1)"]),
    "tx-too-large": (H + "  arrive.expect_tx full[0] bytes 1048576;\n}\n", [
        "7:34: SV105 expect_tx bytes 1048576 exceeds the tx-count limit 2^20-1"]),
    "whole-buffer-copy-too-large": (H + "  smem big bytes 1 << 21;\n  tma.load big -> full[0];\n}\n", [
        "8:3: SV105 copying all of `big` (2097152 bytes) exceeds the tx-count limit 2^20-1; give `bytes N`"]),
    # SV106: named barriers
    "bar-count-not-multiple-of-32": (H + "  bar.sync 1, 48;\n}\n", [
        "7:15: SV106 named-barrier thread count 48 must be a positive multiple of 32 and at most the CTA's "
        "256 threads"]),
    "bar-count-beyond-cta": (H + "  bar.sync 1 count 512;\n}\n", [
        "7:20: SV106 named-barrier thread count 512 must be a positive multiple of 32 and at most the CTA's "
        "256 threads"]),
    "bar-id-16": (H + "  bar.sync 16, 64;\n}\n", ["7:12: SV106 named-barrier id 16 is outside 0..15"]),
    "named-id-16": (H + "  named nb[2] id 15 + i;\n}\n", ["7:18: SV106 named-barrier id 16 is outside 0..15"]),
    "named-count": (H + "  named nb id 3 count 100;\n}\n", [
        "7:23: SV106 named-barrier thread count 100 must be a positive multiple of 32 and at most the CTA's "
        "256 threads"]),
    "bar-arrive-without-count": (H + "  bar.arrive 2;\n}\n", [
        "7:3: SV106 `bar.arrive` needs a thread count (`bar.arrive ID, N`)"]),
    # SV107: multiples of 16
    "smem-bytes": (H + "  smem odd bytes 40;\n}\n", [
        "7:18: SV107 buffer `odd` has 40 bytes; shared-memory buffers used by bulk copies need a positive "
        "multiple of 16"]),
    "tx-bytes": (H + "  arrive.expect_tx full[0] bytes 8;\n}\n", [
        "7:34: SV107 expect_tx bytes 8 is not a positive multiple of 16"]),
    "copy-bytes": (H + "  tma.load tile[0] bytes 24 -> full[0];\n}\n", [
        "7:26: SV107 copy bytes 24 is not a positive multiple of 16"]),
    # SV108: remote operations
    "remote-in-1-cta-cluster": (H + "  arrive full[0] @ 1;\n}\n", [
        "7:20: SV108 remote operation (`@ CTA`) in a protocol whose cluster has 1 CTA"]),
    "wait-on-remote-barrier": (CLUSTER2 + "  wait m parity 0 @ 1;\n}\n", [
        "5:19: SV108 `wait` works only on the executing CTA's own barrier (PTX has no .shared::cluster form "
        "of it)"]),
    "init-on-remote-barrier": (CLUSTER2 + "  init m @ 1;\n}\n", [
        "5:10: SV108 `init` works only on the executing CTA's own barrier (PTX has no .shared::cluster form "
        "of it)"]),
    "multicast-in-1-cta-cluster": (H + "  tma.load tile[0] -> full[0] multicast 1;\n}\n", [
        "7:41: SV108 `multicast` in a protocol whose cluster has 1 CTA"]),
    "cta-group-2-alone": (H + "  tmem.alloc cta_group 2;\n}\n", [
        "7:3: SV108 cta_group 2 needs a cluster of at least 2 CTAs"]),
    # SV109: loop bounds
    "loop-bound-not-constant": (H + "  for k in 0..cta { }\n}\n", [
        "7:15: SV109 a loop bound must be a constant (params are fine); this one depends on cta"]),
    "loop-bound-variable": (H + "  let n = 3;\n  for k in 0..n { }\n}\n", [
        "8:15: SV109 a loop bound must be a constant (params are fine); this one depends on n"]),
    "loop-bound-negative": (H + "  for k in -2..4 { }\n}\n", ["7:12: SV109 loop bound -2 is negative"]),
    "loop-backwards": (H + "  for k in 4..2 { }\n}\n", ["7:15: SV109 loop range 4..2 runs backwards"]),
    # SV110: operations, qualifiers, clauses
    "op-typo": (H + "  arive full[0];\n}\n", ["7:3: SV110 unknown operation `arive`; did you mean `arrive`?"]),
    "op-typo-dotted": (H + "  bar.snyc 1;\n}\n", ["7:3: SV110 unknown operation `bar.snyc`; did you mean `bar.sync`?"]),
    "op-unknown": (H + "  frobnicate;\n}\n", ["7:3: SV110 unknown operation `frobnicate`"]),
    "bad-qualifier": (H + "  wait.release full[0] parity 0;\n}\n", [
        "7:3: SV110 `wait` does not take qualifier `.release` (allowed: .acquire .cluster .cta .parity .relaxed)"]),
    "conflicting-qualifiers": (H + "  arrive.release.relaxed full[0];\n}\n", [
        "7:3: SV110 conflicting qualifiers .relaxed .release"]),
    "missing-parity": (H + "  wait full[0];\n}\n", ["7:3: SV110 `wait` needs `parity E`"]),
    "parity-as-operand": (H + "  wait full[0], 0;\n}\n", [
        "7:3: SV110 `wait` takes 1 operand(s), got 2; write `wait BAR parity E`"]),
    "clause-not-taken": (H + "  wait full[0] parity 0 count 2;\n}\n", [
        "7:25: SV110 `wait` does not take `count N` (it takes: `parity E`)"]),
    "clause-twice": (H + "  wait full[0] parity 0 parity 1;\n}\n", ["7:25: SV110 `parity E` given twice"]),
    "bytes-without-expect-tx": (H + "  arrive full[0] bytes 16;\n}\n", [
        "7:24: SV110 `bytes N` on an arrive needs the `.expect_tx` qualifier"]),
    "wait-group-range": (H + "  wgmma.wait 8;\n}\n", [
        "7:3: SV110 the number of groups left pending must be a constant 0..7"]),
    "tmem-cols": (H + "  tmem.alloc cols 48;\n}\n", ["7:19: SV110 cols 48 must be a power of two in 32..512"]),
    # SV111: wrong kind of object
    "mbarrier-as-buffer": (H + "  read full[0];\n}\n", [
        "7:8: SV111 `full` is an mbarrier, but this operation needs a buffer"]),
    "buffer-as-mbarrier": (H + "  tma.load tile[0] -> tile[1];\n}\n", [
        "7:23: SV111 `tile` is a buffer, but this operation needs an mbarrier"]),
    "integer-as-mbarrier": (H + "  let b = 1;\n  arrive b;\n}\n", [
        "8:10: SV111 `b` is an integer, but this operation needs an mbarrier"]),
    "object-as-integer": (H + "  let x = full;\n}\n", ["7:11: SV111 `full` is an mbarrier, not an integer"]),
    "mbarrier-as-bar-id": (H + "  bar.sync full[0];\n}\n", [
        "7:12: SV111 `full` is an mbarrier, but `bar.sync` needs a barrier id 0..15 or a `named` barrier"]),
    # SV113: kernel shape
    "threads-not-multiple-of-32": ("protocol p {\n  cta threads 100;\n}\n", [
        "2:15: SV113 CTA thread count 100 must be a multiple of 32 in 32..1024"]),
    "cluster-too-large": ("protocol p {\n  cluster 32;\n  cta threads 128;\n}\n", [
        "2:11: SV113 cluster size 32 is outside 1..16"]),
    "missing-cta-threads": ("protocol p {\n  syncthreads;\n}\n", ["1:10: SV113 missing `cta threads N;`"]),
    "huge-role-without-cta-threads": ("protocol p {\n  role r[2] = threads 0..1 << 40;\n}\n", [
        "1:10: SV113 missing `cta threads N;`"]),
    # SV115: expressions
    "division-by-zero": ("protocol p {\n  param N = 4 / 0;\n  cta threads 128;\n}\n", [
        "2:13: SV115 bad expression: division by zero"]),
    "shift-out-of-range": (H + "  let x = 1 << 64;\n}\n", [
        "7:11: SV115 bad expression: shift by 64 is out of range 0..62"]),
    "not-constant": ("protocol p {\n  cluster cta + 1;\n  cta threads 128;\n}\n", [
        "2:11: SV115 the cluster size must be a constant integer: `cta` is not a constant"]),
    "huge-number": (H + "  let x = 123456789012345678901234567890;\n}\n", [
        "7:11: SV115 number 123456789012345678901234567890 is too large (the limit is 2^62)"]),
    "octal-looking-number": (H + "  let x = 010;\n}\n", [
        "7:11: SV115 number `010`: leading zeros are not allowed (C would read it as octal)"]),
    "hex-without-digits": (H + "  let x = 0x_;\n}\n", ["7:11: SV115 number `0x_` has no digits after `0x`"]),
    # SV116: constructs out of place
    "declaration-in-block": (H + "  if prod {\n    mbarrier m count 1;\n  }\n}\n", [
        "8:5: SV116 declarations belong at the top level of the protocol"]),
    "elect-in-elect": (H + "  elect { per warp { } }\n}\n", [
        "7:11: SV116 `elect`/`first thread` inside another one: the body already runs on one thread of the "
        "warp"]),
    "elect-in-first-thread": (H + "  first thread { elect { } }\n}\n", [
        "7:18: SV116 `elect`/`first thread` inside another one: the body already runs on one thread of the "
        "warp"]),
    "collective-in-elect": (H + "  elect { syncthreads; }\n}\n", [
        "7:11: SV116 `syncthreads` must be executed by every lane of a warp; it cannot sit inside "
        "`elect`/`first thread`"]),
    "every-element-in-wait": (H + "  wait full[*] parity 0;\n}\n", [
        "7:8: SV116 `full[*]` (every element) is only allowed with `init` and `inval`"]),
    # SV117: the expect header
    "expect-unknown-code": ("// expect: SV999\nprotocol p {\n  cta threads 128;\n}\n", [
        "1:1: SV117 unknown code SV999 in the `expect:` header; write `// expect: safe` or the codes it must "
        "report, like `// expect: SV201, SV302`"]),
    "expect-nothing": ("// a kernel\n// expect:\nprotocol p {\n  cta threads 128;\n}\n", [
        "2:1: SV117 the `expect:` header lists nothing; write `// expect: safe` or the codes it must report, "
        "like `// expect: SV201, SV302`"]),
    "expect-safe-and-errors": ("// expect: safe, SV201\nprotocol p {\n  cta threads 128;\n}\n", [
        "1:1: SV117 the `expect:` header says `safe` but also lists errors SV201; write `// expect: safe` or "
        "the codes it must report, like `// expect: SV201, SV302`"]),
    # SV118: `choose`
    "choose-in-declaration": (H + "  choose N in 0..4;\n  smem more[N] bytes 1024;\n}\n", [
        "8:13: SV118 `N` is a `choose` value; declarations fix the kernel's shape for every assignment and cannot "
        "depend on it (use a `param`)"]),
    "choose-empty-range": (H + "  choose N in 2..1;\n}\n", [
        "7:18: SV118 `choose N` has no value to choose: the range 2..1 is empty (ranges are half-open, as in "
        "`for`)"]),
    "choose-array-without-index": (H + "  choose kv[2] in 0..3;\n  read tile[kv];\n}\n", [
        "8:13: SV118 `kv` is an array of 2 chosen values; index it (`kv[k]`)"]),
    # several errors of several kinds in one file, sorted by position
    "several": (H + "  arive full[0];\n  read tile[9];\n  wait full[0] parity 0\n}\n", [
        "7:3: SV110 unknown operation `arive`; did you mean `arrive`?",
        "8:13: SV104 index 9 is out of range for `tile[2]`",
        "9:24: SV100 missing `;` at the end of the statement (next comes `}`)",
    ]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_cli_reports_exact_diagnostics(case, tmp_path, capsys):
    text, expected = CASES[case]
    rc, out = run_check(tmp_path, capsys, text)
    path = str(tmp_path / "spec.sync")
    assert rc == 2
    found = printed(out, path)
    assert [str(d) for d in found] == expected
    assert out.rstrip().endswith(f"{path}: error")
    source_lines = text.splitlines()
    for d in found:
        if d.line > len(source_lines) or not source_lines[d.line - 1].strip():
            continue
        # The source line is shown and the caret sits under the reported column.
        assert d.source == source_lines[d.line - 1]
        assert d.caret is not None and d.caret.index("^") == d.col - 1


@pytest.mark.parametrize("case", list(CASES))
def test_api_raises_input_error(case):
    text, expected = CASES[case]
    with pytest.raises(InputError) as info:
        syncverify.load(text, path="spec.sync")
    diags = info.value.diagnostics
    assert [f"{d.span.line}:{d.span.column}: {d.code} {d.message}" for d in diags if d.span] == expected
    assert all(d.span is not None and d.span.path == "spec.sync" for d in diags)
    assert all(d.code in CODES and d.code.startswith("SV1") and d.is_error for d in diags)


def test_every_input_code_is_exercised():
    reported = {line.split()[1] for _, lines in CASES.values() for line in lines}
    # SV112 (unreadable files) and SV114 (-D) need a file system or a command line: tested below.
    # SV119 (a sweep manifest) needs a manifest file: tests/test_sweep.py.
    reported |= {"SV112", "SV114", "SV119"}
    assert reported == {c for c in CODES if c.startswith("SV1")}


def test_caret_width_covers_the_token(tmp_path, capsys):
    rc, out = run_check(tmp_path, capsys, H + "  arrive full[0];\n  frobnicate full[0];\n}\n")
    (d,) = printed(out, str(tmp_path / "spec.sync"))
    assert rc == 2 and d.caret == "  ^" + "~" * (len("frobnicate") - 1)


def test_caret_after_tabs(tmp_path, capsys):
    _rc, out = run_check(tmp_path, capsys, "protocol p {\n\tcta threads 128;\n\t\tarive x;\n}\n")
    (d,) = printed(out, str(tmp_path / "spec.sync"))
    assert (d.line, d.col, d.code) == (3, 3, "SV110")
    assert d.source == "\t\tarive x;".expandtabs(4)
    assert d.caret is not None and d.caret.index("^") == d.source.index("arive")


def test_many_missing_semicolons_are_all_reported_up_to_the_limit(tmp_path, capsys):
    text = "protocol p {\n  cta threads 128;\n" + "  bar.sync 1\n" * (MAX_ERRORS + 5) + "  syncwarp;\n}\n"
    rc, out = run_check(tmp_path, capsys, text)
    found = printed(out, str(tmp_path / "spec.sync"))
    assert rc == 2
    assert [str(d) for d in found] == [f"{line}:13: SV100 missing `;` at the end of the statement (next comes `bar`)"
                                       for line in range(3, 3 + MAX_ERRORS)]


@pytest.mark.parametrize("stmt", ["arrive.release.cluster m @ 2;", "umma.commit m multicast 0b100;",
                                  "tma.load t -> m multicast 0;"])
def test_ranks_outside_the_cluster_are_left_to_the_checker(stmt):
    """A constant CTA rank or mask outside the cluster loads: the checker reports it as SV405, a violation."""
    p = syncverify.load(CLUSTER2 + "  smem t bytes 64;\n  " + stmt + "\n}\n", path="spec.sync")
    assert p.cluster == 2 and len(p.body) == 1


# ---------------------------------------------------------------------------
# SV112: files that cannot be read


def test_missing_file(tmp_path, capsys):
    path = tmp_path / "nope.sync"
    rc = main(["check", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in out + err
    assert f"{path}:1:1: SV112 no such file: {path}" in out.splitlines()


def test_binary_file(tmp_path, capsys):
    rc, out = run_check(tmp_path, capsys, b"\x7fELF\x02\x01\x01\x00\x00\x00protocol")
    path = tmp_path / "spec.sync"
    assert rc == 2
    assert out.splitlines()[0] == f"{path}:1:1: SV112 {path} is a binary file, not a .sync spec"
    assert "ELF" not in out  # no binary garbage echoed as the "source line"


def test_non_utf8_file(tmp_path, capsys):
    rc, out = run_check(tmp_path, capsys, "protocol p {\n  // caf\xe9\n}\n".encode("latin-1"))
    path = tmp_path / "spec.sync"
    assert rc == 2
    assert out.splitlines()[0] == (f"{path}:2:9: SV112 {path} is not UTF-8 text (byte 0xe9 at line 2, "
                                   "offset 21); save it as UTF-8")


def test_too_large_file(tmp_path, capsys):
    rc, out = run_check(tmp_path, capsys, "// " + "x" * MAX_SOURCE_BYTES + "\n")
    path = tmp_path / "spec.sync"
    assert rc == 2
    assert f"{path}:1:1: SV112 {path} is {MAX_SOURCE_BYTES + 4} bytes; specs are limited to 1 MiB" in out


def test_directory_without_specs(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("protocol p { cta threads 32; }")
    rc = main(["check", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in out + err
    assert out.splitlines()[0] == f"{tmp_path}:1:1: SV112 no *.sync files under {tmp_path}"


def test_directory_api(tmp_path):
    with pytest.raises(InputError) as info:
        syncverify.load(tmp_path)
    assert [(d.code, d.message) for d in info.value.diagnostics] == [("SV112", f"{tmp_path} is a directory")]


# ---------------------------------------------------------------------------
# SV114 and usage errors: -D


VALID = "protocol p {\n  param STAGES = 2;\n  cta threads 128;\n  mbarrier m[STAGES] count 1;\n}\n"


def test_define_unknown_param(tmp_path, capsys):
    rc, out = run_check(tmp_path, capsys, VALID, "-D", "STAGE=4", "-D", "ITERS=3")
    found = printed(out, str(tmp_path / "spec.sync"))
    assert rc == 2
    assert [str(d) for d in found] == [
        "1:10: SV114 -D STAGE: no `param STAGE` in this protocol; did you mean `STAGES`?",
        "1:10: SV114 -D ITERS: no `param ITERS` in this protocol",
    ]
    assert found[0].caret == " " * 9 + "^"  # under the protocol's name


def test_define_value_out_of_range(tmp_path, capsys):
    rc, out = run_check(tmp_path, capsys, VALID, "-D", "STAGES=0")
    assert rc == 2
    assert [str(d) for d in printed(out, str(tmp_path / "spec.sync"))] == [
        "4:14: SV104 array size 0 is outside 1..4096"]


@pytest.mark.parametrize(("define", "message"), [
    ("STAGES=four", "<command line>:1:1: SV114 -D STAGES=four: 'four' is not an integer"),
    ("STAGES=1.5", "<command line>:1:1: SV114 -D STAGES=1.5: '1.5' is not an integer"),
])
def test_define_not_an_integer_is_sv114(define, message, tmp_path, capsys):
    path = tmp_path / "spec.sync"
    path.write_text(VALID)
    assert main(["check", str(path), "-D", define]) == 2
    out, err = capsys.readouterr()
    assert message in out and "Traceback" not in out + err


def test_define_without_value_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "spec.sync"
    path.write_text(VALID)
    with pytest.raises(SystemExit) as info:
        main(["check", str(path), "-D", "STAGES"])
    out, err = capsys.readouterr()
    assert info.value.code == 2
    assert "argument -D: -D STAGES: expected NAME=VALUE" in err and "Traceback" not in out + err


def test_defines_through_the_api():
    with pytest.raises(InputError) as info:
        syncverify.load(VALID, defines={"NOPE": 1}, path="spec.sync")
    assert [d.message for d in info.value.diagnostics] == ["-D NOPE: no `param NOPE` in this protocol"]


# ---------------------------------------------------------------------------
# Nesting limits: a clear error, never a RecursionError


@pytest.mark.parametrize("depth", [200, 5000])
def test_deeply_nested_blocks(depth):
    text = "protocol p {\n  cta threads 32;\n  " + "if 1 { " * depth + "}" * depth + "\n}\n"
    with pytest.raises(InputError) as info:
        syncverify.load(text, path="spec.sync")
    (d,) = info.value.diagnostics
    assert d.code == "SV116" and d.span is not None and d.span.line == 3
    assert d.message == (f"blocks nested more than {MAX_BLOCK_DEPTH} deep (an `else if` counts as one more); "
                         "flatten the protocol")


def test_nesting_up_to_the_limit_is_fine():
    depth = MAX_BLOCK_DEPTH
    text = "protocol p {\n  cta threads 32;\n  " + "if 1 { " * depth + "syncwarp; " + "}" * depth + "\n}\n"
    syncverify.load(text, path="spec.sync")
    expr = "1" + " + 1" * (MAX_EXPR_DEPTH - 1)
    p = syncverify.load(f"protocol p {{ cta threads 32; let x = {expr}; }}", path="spec.sync")
    assert p.body[0].value.value == MAX_EXPR_DEPTH  # type: ignore[union-attr]


def test_long_else_if_chain():
    text = "protocol p { cta threads 32; if 1 { } " + "else if 1 { } " * 3000 + "}"
    with pytest.raises(InputError) as info:
        syncverify.load(text, path="spec.sync")
    assert [d.code for d in info.value.diagnostics] == ["SV116"]


@pytest.mark.parametrize("expr", [
    "-" * 3000 + "1",
    "!" * 3000 + "1",
    "1" + " + 1" * 3000,
    "(" * 200 + "1" + " * 2)" * 200,
])
def test_deeply_nested_expressions(expr):
    with pytest.raises(InputError) as info:
        syncverify.load(f"protocol p {{ cta threads 32; let x = {expr}; }}", path="spec.sync")
    (d,) = info.value.diagnostics
    assert d.code == "SV115"
    assert d.message == f"expression nested more than {MAX_EXPR_DEPTH} deep; split it with `let`"


def test_many_parentheses_are_not_nesting():
    p = syncverify.load("protocol p { cta threads 32; let x = " + "(" * 3000 + "7" + ")" * 3000 + "; }")
    assert p.body[0].value.value == 7  # type: ignore[union-attr]


def test_deep_nesting_through_the_cli(tmp_path, capsys):
    rc, out = run_check(tmp_path, capsys, "protocol p {\n  cta threads 32;\n" + "if 1 {" * 1000 + "}" * 1000 + "}")
    assert rc == 2 and "SV116" in out
