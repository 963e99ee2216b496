// The GEMM of sm90_gemm_coop_1x1.cu built against the seeded header overlay (cutlass_seeds/make_overlay.py)
// with the seed a __constant__ rather than a macro value: one PTX holds every seeded bug, each behind a
// branch on `sv_seed`, and the tests set the constant's initializer in the PTX text (one line, so every
// other line keeps its number) to pick the bug. Extraction reads `.const` data with an initializer, so
// each branch is decided exactly as a -DSV_SEED=N build would decide it at compile time. The committed
// cutlass_seeds/sm90_gemm_coop_1x1_s2_seeds.ptx.gz has two mainloop stages (-DSV_STAGES=2), so a stage is
// reused from the third k-tile on (K=192); it was compiled with (paths then made relative)
//   python3 cutlass_seeds/make_overlay.py <include> cutlass_seeded
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo -DSV_STAGES=2 -Icutlass_seeded \
//        sm90_gemm_coop_1x1_seeds.cu
// (nvidia-cutlass 4.2.0.0, nvcc 13.0.88: about 6 minutes on two loaded cores).
__constant__ int sv_seed = 9;  // 9: no seed; the tests rewrite it to 1..5
#define SV_SEED sv_seed
#define SV_CLUSTER_M 1
#include "sm90_gemm_coop_2x1.cu"
