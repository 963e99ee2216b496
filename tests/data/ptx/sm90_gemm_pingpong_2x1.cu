// CUTLASS 3.x sm_90 GEMM: TMA warp-specialized ping-pong mainloop (KernelTmaWarpSpecializedPingpong: two
// consumer warpgroups on alternate tiles, ordered by the OrderedSequenceBarrier of the kernel), cluster 2x1
// (B multicast to the two CTAs of the cluster),
// TMA epilogue. Headers from `pip install nvidia-cutlass` (4.2.0.0: cutlass_library/source/include). The
// PTX beside it (gzipped, paths made relative) was compiled with
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo -I<include> sm90_gemm_pingpong_2x1.cu
// (nvcc 13.0.88), which takes minutes on two cores, so the tests read the committed PTX.
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
using namespace cute;
using ElementA = cutlass::half_t; using LayoutA = cutlass::layout::RowMajor;
using ElementB = cutlass::half_t; using LayoutB = cutlass::layout::ColumnMajor;
using ElementC = cutlass::half_t; using LayoutC = cutlass::layout::ColumnMajor;
using TileShape = Shape<_64,_128,_64>;
#ifndef SV_CLUSTER_M  // sm90_gemm_pingpong_1x2.cu defines it as 1, and SV_CLUSTER_N as 2
#define SV_CLUSTER_M 2
#endif
#ifndef SV_CLUSTER_N
#define SV_CLUSTER_N 1
#endif
using ClusterShape = Shape<Int<SV_CLUSTER_M>,Int<SV_CLUSTER_N>,_1>;
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    ElementC, LayoutC, 8, ElementC, LayoutC, 8,
    cutlass::epilogue::TmaWarpSpecialized>::CollectiveOp;
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, 8, ElementB, LayoutB, 8, float,
    TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedPingpong>::CollectiveOp;
using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int,int,int,int>, CollectiveMainloop, CollectiveEpilogue>;
#ifndef SV_HOST_ONLY  // the host program includes this file for its types
template __global__ void cutlass::device_kernel<GemmKernel>(CUTLASS_GRID_CONSTANT typename GemmKernel::Params const);
#endif
