"""The trace page of an extracted kernel is titled with the kernel's C++ name, not its PTX entry (#35).

`syncverify extract` names the protocol after the PTX entry (`_ZN7cutlass13device_kernelI…`, 1,145
characters for CUTLASS's sm90 cooperative GEMM); `syncverify trace` of that protocol titles the page with
the demangled name, its template arguments elided from the second level and without return type and
parameters (syncverify/demangle.py, `title_name`), HTML-escaped; the whole C++ name and the PTX entry are in
the page body. The kernel here is the real CUTLASS GEMM of tests/test_ptx_cutlass.py with its A box halved
(SV503: the full barrier's bytes never balance), so the page draws a kernel finding.
"""

from __future__ import annotations

import gzip
import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.demangle import TITLE_WIDTH, brief, demangle, title_name

DATA = Path(__file__).parent / "data" / "ptx"
FIELDS = DATA / "sm90_gemm_coop_1x1_fields_256x128x128.bin"  # tests/test_ptx_cutlass.py's 1x1 launch
PARAM_FIELDS = [(0, 4), (4, 16), (1536, 36), (1576, 120), (640, 12), (768, 72), (1408, 4)]
LAUNCH = ["--grid", "1x2x1", "--block", "384x1x1", "--cluster", "1x1x1", "--dynamic-smem", "231424"]
BOXES = {128: 8192, 384: 16384, 896: 4096, 1152: 4096}  # A's box halved: SV503
SHORT = "cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<…>>"


def _entry(ptx: Path) -> str:
    m = re.search(r"\.entry\s+(\w+)", ptx.read_text())
    assert m is not None
    return m[1]


@pytest.fixture(scope="module")
def ptx(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("gemm") / "sm90_gemm_coop_1x1.ptx"
    out.write_bytes(gzip.decompress((DATA / "sm90_gemm_coop_1x1.ptx.gz").read_bytes()))
    return out


@pytest.fixture(scope="module")
def demangled_entry(ptx: Path) -> str:
    full = demangle(_entry(ptx))
    if full is None:
        pytest.skip("no demangler (c++filt, llvm-cxxfilt, cu++filt) reads CUTLASS's entry name here")
    return full


def _texts(page: str) -> dict[str, str]:
    """The text of the page's first <title> (the document's, in <head>; the SVG boxes have their own) and
    first <h1>, character references decoded, as a browser shows them."""
    out = {}
    for tag in ("title", "h1"):
        m = re.search(rf"<{tag}>(.*?)</{tag}>", page, re.S)
        if m is not None:
            assert "<" not in m[1], m[1]  # text only: no element inside
            out[tag] = html.unescape(m[1])
    return out


def test_the_title_form_of_a_cutlass_name(ptx: Path, demangled_entry: str):
    short, whole = title_name(_entry(ptx))
    assert whole == demangled_entry and whole.startswith("void cutlass::device_kernel<")
    assert short == SHORT and len(short) <= TITLE_WIDTH
    # a short demangled name is kept whole, parameters included; a name that is not mangled as it is
    assert title_name("_Z9ws_rowsumPKfPfi")[0] in ("ws_rowsum(float const*, float*, int)", "_Z9ws_rowsumPKfPfi")
    assert title_name("cutlass_ws_ring") == ("cutlass_ws_ring", None)
    # the report's own short form (cli/kernel.py) is unchanged: outer template level kept, parameters too
    assert brief(demangled_entry).startswith("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<…> >(")


@pytest.fixture(scope="module")
def page(ptx: Path, demangled_entry: str, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("page")
    args = list(LAUNCH)
    for off, n in PARAM_FIELDS:
        args += ["--param", f"0[{off}:{n}]=@{FIELDS}"]
    for off, n in BOXES.items():
        args += ["--tensor-bytes", f"0[{off}]={n}"]
    sync = tmp / "gemm.sync"
    assert main(["extract", str(ptx), *args, "-o", str(sync)]) == 0
    assert f"protocol {_entry(ptx)} {{" in sync.read_text()  # the protocol is named after the PTX entry
    out = tmp / "gemm.trace.html"
    assert main(["trace", str(sync), "-o", str(out), "--code", "SV503"]) == 1
    return out


def test_the_page_is_titled_with_the_demangled_name_escaped(page: Path, ptx: Path, demangled_entry: str):
    text = page.read_text(encoding="utf-8")
    raw = re.search(r"<title>(.*?)</title>", text, re.S)
    assert raw is not None and "&lt;…&gt;&gt;" in raw[1]  # `<…>>` escaped
    got = _texts(text)
    assert got["title"] == f"{SHORT} — syncverify trace"
    assert got["h1"] == SHORT
    assert _entry(ptx) not in got["title"]
    # the whole name (kilobytes of template arguments) and the entry are in the body, escaped
    assert html.escape(demangled_entry, quote=False) in text and _entry(ptx) in text


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (Debian package `chromium`)")
def test_headless_chromium_reads_the_same_title(page: Path, tmp_path: Path):
    """The page as a browser parses it: the title is the short C++ name, the `<…>` read as text, not tags."""
    browser = _chromium()
    assert browser is not None
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=False).stdout
    got = _texts(dom)
    assert got.get("title") == f"{SHORT} — syncverify trace", dom[:400]
    assert got.get("h1") == SHORT
