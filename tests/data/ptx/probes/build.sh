#!/bin/sh
# Rebuilds the committed PTX of this directory from its CUDA sources (nvcc 13.0), with the CUDA file named
# by its base name so that findings and refusals point at the .cu beside the .ptx.
set -e
cd "$(dirname "$0")"
for cu in *.cu; do
  nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo -o "${cu%.cu}.ptx" "$cu"
  sed -i "s|\"$PWD/$cu\"|\"$cu\"|" "${cu%.cu}.ptx"
done
