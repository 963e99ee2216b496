#!/bin/sh
# The PTX of ws_rowsum.cu and its two planted bugs, as `syncverify check ws_rowsum.cu` compiles it.
set -e
cd "$(dirname "$0")"
F="-std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo"
nvcc $F -o ws_rowsum.ptx ws_rowsum.cu
nvcc $F -DEARLY_RELEASE -o ws_rowsum_early_release.ptx ws_rowsum.cu
nvcc $F -DWRONG_PARITY -o ws_rowsum_wrong_parity.ptx ws_rowsum.cu
