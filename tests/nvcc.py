"""Compile an emitted kernel with nvcc for sm_90a, as the GPU batch's kernels are compiled."""

from __future__ import annotations

import subprocess
from pathlib import Path


def ptxas_clean_cubin(source: str, where: Path) -> None:
    """Compile ``source`` to a cubin; fail on an error or on any ptxas message (a serialized wgmma,
    C7510-C7520, or any other ptxas warning changes what the kernel measures)."""
    src = where / "k.cu"
    src.write_text(source)
    r = subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-o", str(where / "k.cubin"), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ptxas" not in r.stderr, r.stderr
