// The GEMM of sm90_gemm_coop_2x1.cu with one CTA per cluster (no multicast): cooperative mainloop, TMA
// epilogue, headers of nvidia-cutlass 4.2.0.0. Compiled like it:
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo -I<include> sm90_gemm_coop_1x1.cu
// and sm90_gemm_coop_1x1_s2.ptx.gz, with two mainloop stages, adding -DSV_STAGES=2 (nvcc 13.0.88).
#define SV_CLUSTER_M 1
#include "sm90_gemm_coop_2x1.cu"
