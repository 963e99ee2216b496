"""What the PTX front end remembers, or computes once, gives the answers it gave when it computed each time.

The memos (a finding's place in the source, a wgmma operand's byte ranges), the registers that can reach
synchronization (read once per instruction, not at each pass of the fixpoint) and the process's collector
settings (the command's process, not a program that imports syncverify).
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from syncverify.ptx.cfg import Cfg, affects_sync
from syncverify.ptx.frames import LIBRARY_PATTERNS, frames, user_frame
from syncverify.ptx.loops import _DEFS, LoopInfo, _names, _seeds
from syncverify.ptx.parse import Module, parse_ptx

PTX = Path(__file__).parent / "data" / "ptx"
KERNELS = ["sm90_gemm_pingpong_1x1.ptx.gz", "sm100_gemm_2sm_2x1_s2.ptx.gz", "fmha_hopper_fwd_ws_64.ptx.gz"]


def _module(name: str, tmp_path: Path) -> Module:
    text = gzip.decompress((PTX / name).read_bytes()).decode()
    return parse_ptx(text, str(tmp_path / name.removesuffix(".gz")))


def _at(frame) -> tuple[str, int, int]:  # type: ignore[no-untyped-def]
    return frame.file, frame.line, frame.column


@pytest.mark.parametrize("name", KERNELS)
def test_the_remembered_place_of_each_instruction_is_its_own_chain(name: str, tmp_path: Path) -> None:
    """Instructions at one source position can have different call sites above it (`outer`, a field the
    position's equality leaves out: 67 such positions in the ping-pong GEMM): each gets its own chain."""
    mod = _module(name, tmp_path)
    outers: dict[object, set[object]] = {}
    for fn in mod.functions:
        for ins in fn.body or ():
            where = user_frame(ins, mod, LIBRARY_PATTERNS)
            if ins.src is None:
                assert where is None
                continue
            outers.setdefault(ins.src, set()).add(ins.src.outer)
            chain = [_at(f) for f in frames(ins, mod)]
            primary, notes = where  # type: ignore[misc]
            assert any(chain[i] == _at(primary) and chain[:i] + chain[i + 1:] == [_at(n) for n in notes]
                       for i in range(len(chain))), (ins.line, chain, primary, notes)
    differing = sum(len(v) > 1 for v in outers.values())
    assert differing > 0  # the kernel has positions the memo must tell apart


def _relevant_by_the_rule(info: LoopInfo, zero_global: bool) -> frozenset[str]:
    """LoopInfo.relevant as its docstring states it: from the seeds, each pass adds at once what every writer
    met by the set so far makes relevant, reading the instructions again, until a pass adds nothing."""
    body = info.cfg.body
    rel: set[str] = set().union(*(_seeds(ins, zero_global) for ins in body))

    def adds(ins) -> set[str]:  # type: ignore[no-untyped-def]
        ops = ins.operands
        if not ops or ins.base in ("ld", "ldu", "st", "bra") or affects_sync(ins) or \
                ins.opcode.startswith("cp.async.bulk.tensor"):
            return set()
        met, inputs = (ops[:1], ops[1:]) if ins.base in _DEFS else (ops, ops)
        return {n for op in inputs for n in _names(op)} if any(n in rel for op in met for n in _names(op)) else set()

    while new := set().union(*map(adds, body)) - rel:
        rel |= new
    return frozenset(rel)


@pytest.mark.parametrize("name", KERNELS)
def test_the_registers_that_reach_synchronization_are_the_rules(name: str, tmp_path: Path) -> None:
    mod = _module(name, tmp_path)
    for fn in mod.entries():
        info = LoopInfo(Cfg(fn))
        for zero_global in (False, True):
            got = info.relevant(zero_global)
            assert got == _relevant_by_the_rule(info, zero_global)
            assert len(got) > 100  # a GEMM's barrier addresses, parities and guards, and their inputs


def test_the_collector_is_set_by_the_command_only() -> None:
    """`syncverify` (entry) freezes the modules' objects and collects young objects less often; a program
    that imports the package keeps Python's settings."""
    probe = ("import gc, sys; before = gc.get_threshold(); import syncverify.cli as c; "
             "assert gc.get_threshold() == before and gc.get_freeze_count() == 0, 'import changed the collector'; "
             "c.main = lambda: 0\n"
             "try:\n    c.entry()\nexcept SystemExit as done:\n    assert done.code == 0\n"
             "print(gc.get_threshold()[0] == c.GC_YOUNG_THRESHOLD, gc.get_freeze_count() > 10000)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True"]
