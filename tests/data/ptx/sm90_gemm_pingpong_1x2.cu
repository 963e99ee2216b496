// The GEMM of sm90_gemm_pingpong_2x1.cu with a 1x2 cluster (two CTAs along N: A multicast to both):
// ping-pong mainloop, TMA epilogue, headers of nvidia-cutlass 4.2.0.0. Compiled like it:
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo -I<include> sm90_gemm_pingpong_1x2.cu
// (nvcc 13.0.88; the PTX beside it gzipped, paths made relative).
#define SV_CLUSTER_M 1
#define SV_CLUSTER_N 2
#include "sm90_gemm_pingpong_2x1.cu"
