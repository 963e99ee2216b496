"""Generated CUDA never carries spec text except sanitized identifiers.

A spec is input from anywhere (a pull request, a bug report); the kernel
emitted from it is compiled and run. So nothing in a spec — names, params,
comments, the file's own path — may reach the .cu as code. The tests write
specs whose names are C/C++ keywords and the emitter's own identifiers, whose
comments carry `#error`, `__asm__`, backslash line continuations and
bidirectional-override characters, and whose file name holds a newline, then
check the emitted source:

* it is printable ASCII (no control or bidi characters: "Trojan source");
* with its comments removed (a C lexer, line continuations included), it is
  token for token the kernel of the same protocol with harmless names, except
  for the spec's names appearing under the emitter's prefixes (`in_NAME`,
  `v_NAME`) — so no spec text is code;
* it compiles with nvcc (compile only, sm_90a) where nvcc is installed.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import syncverify
from syncverify.cli import main
from syncverify.codegen import emit

# A template with every kind of name the language has; {X} marks a name to fill, {C} a comment payload.
TEMPLATE = """\
// expect: safe
// {C1}
/* {C2} */
protocol {proto} {{
  param {stages} = 2;             // {C3}
  param {iters} = 3;
  cta threads 64;
  role {prod} = warp 0;
  role {cons} = warp 1;
  smem {tile}[{stages}] bytes 1024;
  mbarrier {full}[{stages}] count 1;
  mbarrier {empty}[{stages}] count 32;
  named {nb} id 1 count 64;
  if {prod} {{ elect {{ init {full}[*]; init {empty}[*]; }} }}
  syncthreads;                    /* {C4} */
  if {prod} {{
    for {k} in 0..{iters} {{
      let {s} = {k} % {stages};
      wait {empty}[{s}] parity ({k} / {stages} + 1) % 2;
      elect {{ arrive.expect_tx {full}[{s}] /* {C5} */ bytes 1024; tma.load {tile}[{s}] -> {full}[{s}]; }}
    }}
  }}
  if {cons} {{
    for {k2} in 0..{iters} {{
      let {s2} = {k2} % {stages};
      wait {full}[{s2}] parity ({k2} / {stages}) % 2;  // {C6}
      read /* {C7} */ {tile}[{s2}];
      arrive {empty}[{s2}];
    }}
  }}
  bar.sync {nb};
}}
"""
SLOTS = ["proto", "stages", "iters", "prod", "cons", "tile", "full", "empty", "nb", "k", "s", "k2", "s2"]
BENIGN = {slot: f"n{i}" for i, slot in enumerate(SLOTS)}

# Names that would do harm (or clash) if they reached the kernel as bare identifiers.
HOSTILE_NAMES = [
    {"proto": "__asm__", "stages": "volatile", "iters": "return", "prod": "__global__", "cons": "main",
     "tile": "asm", "full": "int", "empty": "u32", "nb": "_Pragma", "k": "c", "s": "inst", "k2": "sv_now",
     "s2": "define"},
    {"proto": "main", "stages": "__syncthreads", "iters": "INT_MAX", "prod": "c", "cons": "inst",
     "tile": "sv_smem_base", "full": "sv_kernel", "empty": "blockDim", "nb": "threadIdx", "k": "tid", "s": "idx",
     "k2": "j", "s2": "__device__"},
]
# Comment payloads: code after a closing comment, preprocessor lines, a line continuation that would swallow
# the next emitted line, bidi overrides, NULs are refused by the loader so not here.
HOSTILE_COMMENTS = {
    "C1": "*/ __asm__(\"trap;\"); /*",
    "C2": "\n#error INJECTED_C2\n#define return exit(1);\n",
    "C3": "trailing backslash \\",
    "C4": "// \\\n#error INJECTED_C4",
    "C5": "*\\/ ??/ \u202e#error INJECTED_C5\u202c",
    "C6": "*/ #include </etc/passwd> /* \\",
    "C7": "\u202eINJECTED_C7 \\u0041 \\x41 \\",
}


# Harmless comments with the same line breaks, so that the spec lines the kernel cites stay the same.
QUIET = {slot: "note" + "\n" * text.count("\n") for slot, text in HOSTILE_COMMENTS.items()}


def spec_text(names: dict[str, str], comments: dict[str, str]) -> str:
    return TEMPLATE.format(**names, **comments)


def emitted(text: str, path: str = "inject.sync") -> str:
    return emit(syncverify.load(text, path=path)).source


_C_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//(?:\\\n|[^\n])*|/\*.*?\*/|[A-Za-z_]\w*|'
                       r"\d[\w.]*|\S", re.S)


def code_tokens(source: str) -> list[str]:
    """The tokens of a C++ source with comments removed (line continuations joined first, as cpp does)."""
    joined = source.replace("\\\n", "")
    return [t for t in _C_TOKENS.findall(joined) if not t.startswith(("//", "/*"))]


def assert_no_spec_text(hostile_src: str, benign_src: str, names: dict[str, str]) -> None:
    bad = sorted({hex(ord(ch)) for ch in hostile_src if not (ch == "\n" or " " <= ch <= "~")})
    assert not bad, f"non-printable or non-ASCII characters in the kernel: {bad}"
    got, want = collections.Counter(code_tokens(hostile_src)), collections.Counter(code_tokens(benign_src))
    allowed_new = {f"{p}{names[s]}" for s in names for p in ("in_", "v_")}
    allowed_gone = {f"{p}{BENIGN[s]}" for s in names for p in ("in_", "v_")}
    extra, missing = got - want, want - got
    assert set(extra) <= allowed_new, f"spec text in the kernel's code: {sorted(set(extra) - allowed_new)}"
    assert set(missing) <= allowed_gone, f"kernel code changed by spec text: {sorted(set(missing) - allowed_gone)}"
    assert "INJECTED" not in " ".join(code_tokens(hostile_src))


@pytest.fixture(scope="module")
def benign_source() -> str:
    return emitted(spec_text(BENIGN, QUIET))


@pytest.mark.parametrize("names", HOSTILE_NAMES, ids=["keywords", "emitter-names"])
def test_hostile_names_stay_prefixed(names, benign_source):
    assert_no_spec_text(emitted(spec_text(names, QUIET)), benign_source, names)


def test_hostile_comments_never_reach_code(benign_source):
    assert_no_spec_text(emitted(spec_text(BENIGN, HOSTILE_COMMENTS)), benign_source, BENIGN)


def test_comment_payloads_are_in_the_spec_but_not_the_kernel():
    """The payloads do sit inside operations' source spans (C5, C7), the text the emitter quotes."""
    text = spec_text(BENIGN, HOSTILE_COMMENTS)
    protocol = syncverify.load(text, path="inject.sync")
    quoted = [protocol.text_of(s.span) for s in _ops(protocol.body)]
    assert any("INJECTED_C7" in q for q in quoted)
    source = emitted(text)
    quoting = [line for line in source.splitlines() if "INJECTED" in line]
    for line in quoting:
        # only inside one well-formed block comment on that line
        assert re.fullmatch(r"[^\"]*/\*[^\n]*?\*/[^\"]*", line), line
        assert "*/" not in line[line.index("/*") + 2: line.rindex("*/")], line


def _ops(stmts):
    for s in stmts:
        for attr in ("body", "then", "orelse"):
            if hasattr(s, attr):
                yield from _ops(getattr(s, attr))
        if not hasattr(s, "body") and not hasattr(s, "then"):
            yield s


def test_file_name_with_newline(tmp_path, capsys, benign_source):
    """The spec's path is quoted in the kernel's header comment: a newline in a file name must not end it."""
    evil = tmp_path / "x\n#error INJECTED_PATH\n__asm__(\"trap;\");\n\u202e.sync"
    try:
        evil.write_text(spec_text(BENIGN, QUIET))
    except OSError:
        pytest.skip("this file system refuses newlines in names")
    out = tmp_path / "out.cu"
    assert main(["emit", str(evil), "-o", str(out)]) == 0, capsys.readouterr().err
    source = out.read_text()
    assert_no_spec_text(source, benign_source, BENIGN)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_hostile_kernel_compiles(tmp_path):
    """Everything hostile at once still compiles (compile only, no GPU needed)."""
    names = HOSTILE_NAMES[0]
    src = tmp_path / "hostile.cu"
    src.write_text(emitted(spec_text(names, HOSTILE_COMMENTS)))
    cmd = ["nvcc", "-arch=sm_90a", "-std=c++17", "-c", str(src), "-o", str(tmp_path / "hostile.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert Path(tmp_path / "hostile.o").stat().st_size > 0
