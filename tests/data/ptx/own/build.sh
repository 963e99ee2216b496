#!/bin/sh
# The PTX of ws_rowsum.cu and its two planted bugs, compiled as `syncverify check ws_rowsum.cu` compiles it.
# nvcc records the absolute path of each source in `.file`; it is made relative to this directory, so the
# checked-in PTX names the sources beside it wherever the repository is cloned.
set -e
cd "$(dirname "$0")"
F="-std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo"
nvcc $F -o ws_rowsum.ptx ws_rowsum.cu
nvcc $F -DEARLY_RELEASE -o ws_rowsum_early_release.ptx ws_rowsum.cu
nvcc $F -DWRONG_PARITY -o ws_rowsum_wrong_parity.ptx ws_rowsum.cu
sed -i "s|\"$(pwd)/|\"|" ws_rowsum.ptx ws_rowsum_early_release.ptx ws_rowsum_wrong_parity.ptx
