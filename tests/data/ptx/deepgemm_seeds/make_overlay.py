"""Writes a copy of DeepGEMM's include directory (deep_gemm/include at commit
54e22612409371d6364144b69086735beb54e98b) with a seeded bug into OUT, for compiling
../deepgemm_sm90_fp8_1d2d.cu with `-DSV_SEED=N -I OUT` instead of the shipped
headers (a whole copy: the headers include each other by their `deep_gemm/...` paths). The edit
replaces one line by one line, so every other line keeps its number and a finding is reported at
the DeepGEMM line it is about. SV_SEED selects the bug (0: none):

  1 wrong rank   empty_barrier_arrive: every releasing lane arrives on its own CTA's empty barrier
                 (`cute::block_rank_in_cluster()`, the branch DeepGEMM takes when the peer CTA has no
                 block) instead of lane r on CTA r; the counts still add up

Usage: python3 make_overlay.py DEEPGEMM_INCLUDE OUT
(DEEPGEMM_INCLUDE: a checkout's deep_gemm/include, e.g. from
 `git archive 54e2261 deep_gemm/include | tar -x`.)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

KERNEL = "deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh"

# (file, line, the line's text as shipped, its replacement)
EDITS = [
    (KERNEL, 268,
     "                    auto target_cta = scheduler.is_peer_cta_alive ? lane_idx : cute::block_rank_in_cluster();",
     "                    auto target_cta = (SV_SEED != 1 and scheduler.is_peer_cta_alive) ? lane_idx : "
     "cute::block_rank_in_cluster();"),
]


def main(src: str, out: str) -> None:
    shutil.copytree(src, out, dirs_exist_ok=True)
    for rel, line, shipped, seeded in EDITS:
        path = Path(out) / rel
        lines = path.read_text().split("\n")
        if lines[line - 1] != shipped:
            raise SystemExit(f"{rel}:{line}: not the shipped line: {lines[line - 1]!r}")
        lines[line - 1] = seeded
        path.write_text("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
