// CUTLASS 3.x sm_90 GEMM with the stream-K tile scheduler: the cooperative GEMM of sm90_gemm_coop_1x1.cu
// (TMA warp-specialized cooperative mainloop, one-CTA clusters, TMA epilogue) with
// `cutlass::gemm::StreamKScheduler` as GemmUniversal's fourth template argument, which selects
// `PersistentTileSchedulerSm90StreamK` (cutlass/gemm/kernel/tile_scheduler.hpp,
// sm90_tile_scheduler_stream_k.hpp): CTAs that share an output tile reduce their partial accumulators
// through a workspace guarded by flags (`fixup`, cutlass/barrier.h `wait_eq` / `arrive_inc`).
// Headers of pip nvidia-cutlass 4.2.0.0, as they ship. The PTX beside it (gzipped, paths made relative)
// was compiled with two mainloop stages:
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo -I<include> -DSV_STAGES=2 \
//        sm90_gemm_coop_streamk.cu
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
using namespace cute;
using ElementA = cutlass::half_t; using LayoutA = cutlass::layout::RowMajor;
using ElementB = cutlass::half_t; using LayoutB = cutlass::layout::ColumnMajor;
using ElementC = cutlass::half_t; using LayoutC = cutlass::layout::ColumnMajor;
using TileShape = Shape<_128,_128,_64>;
using ClusterShape = Shape<_1,_1,_1>;
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    ElementC, LayoutC, 8, ElementC, LayoutC, 8,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
#ifdef SV_STAGES
using SvStageCount = cutlass::gemm::collective::StageCount<SV_STAGES>;
#else
using SvStageCount = cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>;
#endif
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, 8, ElementB, LayoutB, 8, float,
    TileShape, ClusterShape,
    SvStageCount, cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int,int,int,int>, CollectiveMainloop, CollectiveEpilogue,
                                                        cutlass::gemm::StreamKScheduler>;
#ifndef SV_HOST_ONLY  // a host program includes this file for its types
template __global__ void cutlass::device_kernel<GemmKernel>(CUTLASS_GRID_CONSTANT typename GemmKernel::Params const);
#endif
