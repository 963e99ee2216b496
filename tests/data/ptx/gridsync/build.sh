#!/bin/sh
# Rebuilds the committed PTX of this directory from its CUDA sources (nvcc 13.0, CUTLASS headers of pip
# nvidia-cutlass 4.2.0.0 as they ship), with the CUDA file named by its base name so that findings point
# at the .cu beside the .ptx. Seeds are the same source under -D macros.
set -e
cd "$(dirname "$0")"
INC=$(python3 -c "import cutlass_library,os;print(os.path.dirname(cutlass_library.__file__))")/source/include
build() {  # build OUT.ptx SRC.cu FLAGS...
  out=$1; cu=$2; shift 2
  nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -ptx -lineinfo -I"$INC" "$@" -o "$out" "$cu"
  sed -i "s|\"$PWD/$cu\"|\"$cu\"|" "$out"
}
build splitk_flag.ptx splitk_flag.cu
build splitk_flag_no_wait.ptx splitk_flag.cu -DNO_WAIT
build splitk_flag_flag_count_2.ptx splitk_flag.cu -DFLAG_COUNT=2
build grid_barrier.ptx grid_barrier.cu
build grid_barrier_reset_race.ptx grid_barrier.cu -DRESET_RACE
build grid_barrier_no_barrier.ptx grid_barrier.cu -DNO_BARRIER
build refused.ptx refused.cu
build grid_sync.ptx grid_sync.cu
build grid_sync_read_early.ptx grid_sync.cu -DREAD_EARLY
build last_block.ptx last_block.cu
build last_block_no_fence.ptx last_block.cu -DNO_FENCE
build last_block_off_by_one.ptx last_block.cu -DOFF_BY_ONE
build last_block_refused.ptx last_block_refused.cu
build last_block_smem.ptx last_block_smem.cu
build last_block_smem_acquire_fence.ptx last_block_smem.cu -DACQUIRE_FENCE
