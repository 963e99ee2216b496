"""Role names read from sources that are not beside the PTX (#35): ptx/source_files.py.

The committed FMHA PTX (tests/data/ptx/fmha_hopper_fwd_ws_64.ptx.gz, CUTLASS example 88 built from the
nvidia-cutlass package) names its kernel file `cutlass_library/source/examples/88_hopper_fmha/kernel/../kernel/
fmha_kernel_tma_warpspecialized.hpp`, relative to the site-packages it was built in. That file is found as a
suffix of the path under the installed package's `source/examples`, and used only because its content is the
one compiled: every `.loc` of it names a line the file has, at a token. The near twins: the same file with one
line inserted, or with a size that differs from the one the `.file` entry gives, is not read, and the role keeps
its synthetic name.
"""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.ptx.cutlass_headers import cutlass_include
from syncverify.ptx.extract import find_nvcc
from syncverify.ptx.parse import Module
from syncverify.ptx.source_files import MIN_LOCS, candidates, source_lines, source_path

DATA = Path(__file__).parent / "data" / "ptx"
KERNEL = "cutlass_library/source/examples/88_hopper_fmha/kernel/../kernel/fmha_kernel_tma_warpspecialized.hpp"
NEEDS_CUTLASS = pytest.mark.skipif(cutlass_include() is None, reason="needs the nvidia-cutlass package")


@pytest.fixture(scope="module")
def fmha_text() -> str:
    return gzip.decompress((DATA / "fmha_hopper_fwd_ws_64.ptx.gz").read_bytes()).decode()


def _at(text: str, where: Path) -> Module:
    """A module of this PTX text, as if it lay at ``where``: ptx/source_files.py reads only the text's `.file`
    and `.loc` directives and the path, so nothing else of the (large) PTX is parsed."""
    return Module(str(where), text, "", (), {}, (), ())


@NEEDS_CUTLASS
def test_the_fmha_kernel_file_is_found_under_the_installed_examples(fmha_text: str, tmp_path: Path):
    mod = _at(fmha_text, tmp_path / "fmha.ptx")
    assert not Path(KERNEL).exists()  # not at the path the PTX names (relative to another site-packages)
    found = source_path(mod, KERNEL)
    inc = Path(cutlass_include() or "")
    assert found == str(inc.parent / "examples" / "88_hopper_fmha" / "kernel" / "fmha_kernel_tma_warpspecialized.hpp")
    lines = source_lines(mod, KERNEL)
    assert lines is not None and "ProducerWarpRole::LoadKV" in lines[293]  # line 294: the LoadKV branch


def _relocated(text: str, name: str) -> str:
    """The PTX with its kernel file entry naming ``name`` instead (a path under no CUTLASS root)."""
    return text.replace(f'"{KERNEL}"', f'"{name}"', 1)


@NEEDS_CUTLASS
def test_a_copy_beside_the_ptx_is_read_only_as_compiled(fmha_text: str, tmp_path: Path):
    """The file's content beside the PTX under another name: read when it is the same bytes; not read with one
    line inserted at the top (every `.loc` then points one line early), nor with a size other than the one the
    `.file` entry gives."""
    inc = Path(cutlass_include() or "")
    genuine = (inc.parent / "examples" / "88_hopper_fmha" / "kernel" / Path(KERNEL).name).read_text()
    name = "src/my_fmha_kernel.hpp"
    text = _relocated(fmha_text, name)
    (tmp_path / "src").mkdir()
    copy = tmp_path / "src" / "my_fmha_kernel.hpp"
    copy.write_text(genuine)
    mod = _at(text, tmp_path / "fmha.ptx")
    assert source_path(mod, name) == str(copy)

    shifted = tmp_path / "shifted"
    (shifted / "src").mkdir(parents=True)
    (shifted / "src" / "my_fmha_kernel.hpp").write_text("// a line the compiled file did not have\n" + genuine)
    assert source_lines(_at(text, shifted / "fmha.ptx"), name) is None

    size = len(genuine.encode())
    sized = text.replace(f'"{name}"', f'"{name}", 1712345678, {size}', 1)
    assert source_path(_at(sized, tmp_path / "fmha.ptx"), name) == str(copy)
    wrong = text.replace(f'"{name}"', f'"{name}", 1712345678, {size + 1}', 1)
    assert source_lines(_at(wrong, tmp_path / "fmha.ptx"), name) is None


def test_candidates_are_suffixes_without_climbing(tmp_path: Path):
    """A suffix never starts inside `..`: `kernel/../kernel/x.hpp` is looked for as `kernel/x.hpp`, never as
    `../kernel/x.hpp` above a root."""
    got = candidates("a/b/kernel/../kernel/x.hpp", str(tmp_path), (str(tmp_path / "root"),))
    assert str(tmp_path / "root" / "kernel" / "x.hpp") in got and str(tmp_path / "root" / "x.hpp") in got
    assert not any(".." in Path(c).parts for c in got[2:])
    assert MIN_LOCS >= 8


NEEDS_HOST = pytest.mark.skipif(find_nvcc() is None or cutlass_include() is None or shutil.which("c++filt") is None,
                                reason="needs nvcc, the nvidia-cutlass package and c++filt")


@NEEDS_HOST
def test_the_fmha_roles_have_source_names(tmp_path: Path):
    """`extract fmha.ptx --cutlass-fmha 1,1,128,64,64` (tests/test_cutlass_host_sm100.py's check): the KV load
    warp is named from its branch (`producer_warp_role == ProducerWarpRole::LoadKV`), the two math warpgroups
    from theirs (`Consumer0 || … || Consumer3`: four alternatives for two warpgroups, so what they share, with
    their warps); the warps that run no statement of their own keep `wN`."""
    ptx = tmp_path / "fmha_hopper_fwd_ws_64.ptx"
    ptx.write_bytes(gzip.decompress((DATA / "fmha_hopper_fwd_ws_64.ptx.gz").read_bytes()))
    out = tmp_path / "fmha.sync"
    assert main(["extract", str(ptx), "--cutlass-fmha", "1,1,128,64,64", "-o", str(out)]) == 0
    roles = dict(re.findall(r"^  role (\w+)(?:\[\d+\])? = (warp \d+)", out.read_text(), re.M))
    assert roles == {"w0": "warp 0", "producer_load_kv": "warp 1", "w2_3": "warp 2", "consumer_w4_7": "warp 4",
                     "consumer_w8_11": "warp 8"}, roles
    assert "(fmha_kernel_tma_warpspecialized.hpp:294)" in out.read_text()
