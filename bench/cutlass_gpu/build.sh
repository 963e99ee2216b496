#!/usr/bin/env bash
# Builds, on a machine without a GPU, everything bench/cutlass_gpu/cutlass_run.py runs on the H200 for the
# CUTLASS sm_90 cooperative GEMM (tests/data/ptx/sm90_gemm_coop_2x1.cu) and its seeded bugs:
#   - a cubin of each PTX the checker verified: the committed PTX of the 1x1 and 2x1 kernels and of seeds 1-4
#     (tests/data/ptx/, tests/data/ptx/cutlass_seeds/), and seed 5 compiled here from the seeded headers
#     (cutlass_seeds/make_overlay.py), its PTX kept beside its cubin for the checker;
#   - the host programs gemm_run_1x1 and gemm_run_2x1 (gemm_run.cu: CUTLASS's host code makes the Params
#     and the TMA descriptors on the device machine, at run time), and gemm_run_2x1_seed6, the same host
#     program built on the seeded headers with seed 6 (B's multicast box encoded whole);
#   - fields_2x1 (tests/data/ptx/sm90_gemm_coop_2x1_fields.cu): the --param options of the check at any size;
#   - the two-stage 1x1 GEMM (-DSV_STAGES=2: a stage is reused from the third k-tile on): a cubin of the
#     committed unseeded PTX (sm90_gemm_coop_1x1_s2.ptx.gz) and of seeds 2, 3 and 5 of the one seeds PTX
#     (cutlass_seeds/sm90_gemm_coop_1x1_s2_seeds.ptx.gz), the `sv_seed` constant's initializer rewritten
#     exactly as tests/test_ptx_cutlass.py rewrites it, so each cubin is the PTX the checker decided; the
#     host program gemm_run_1x1_s2 and fields_1x1_s2, built with the same -DSV_STAGES=2 so that the Params,
#     grid and shared-memory size are that kernel's.
# Usage: bench/cutlass_gpu/build.sh [OUT]   (default build/cutlass; CUTLASS=<.../cutlass_library/source>)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build/cutlass}
if [ -z "${CUTLASS:-}" ]; then
  CUTLASS=$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))' 2>/dev/null) || {
    echo "build.sh: set CUTLASS to nvidia-cutlass's cutlass_library/source (pip install nvidia-cutlass==4.2.0.0)" >&2
    exit 2
  }
fi
DATA=$ROOT/tests/data/ptx
NVCC="nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr"
mkdir -p "$OUT"
cd "$OUT"

# the PTX: committed where it is, seed 5 compiled from the seeded headers
for v in sm90_gemm_coop_1x1 sm90_gemm_coop_2x1 sm90_gemm_pingpong_1x1 sm90_gemm_pingpong_2x1; do
  [ -f $v.ptx ] || gunzip -c "$DATA/$v.ptx.gz" > $v.ptx
done
for n in 1 2 3 4; do
  v=sm90_gemm_coop_2x1_seed$n
  [ -f $v.ptx ] || gunzip -c "$DATA/cutlass_seeds/$v.ptx.gz" > $v.ptx
done
[ -d cutlass_seeded ] || python3 "$DATA/cutlass_seeds/make_overlay.py" "$CUTLASS/include" cutlass_seeded
# the two-stage 1x1 kernel and its seeds: one line of the seeds PTX differs, the constant's initializer
[ -f sm90_gemm_coop_1x1_s2.ptx ] || gunzip -c "$DATA/sm90_gemm_coop_1x1_s2.ptx.gz" > sm90_gemm_coop_1x1_s2.ptx
SEED_CONST='.const .align 4 .u32 sv_seed = 9;'
for n in 2 3 5; do
  v=sm90_gemm_coop_1x1_s2_seed$n
  [ -f $v.ptx ] && continue
  gunzip -c "$DATA/cutlass_seeds/sm90_gemm_coop_1x1_s2_seeds.ptx.gz" > $v.tmp
  [ "$(grep -cxF "$SEED_CONST" $v.tmp)" = 1 ] || { echo "build.sh: $SEED_CONST not once in the seeds PTX" >&2; exit 1; }
  sed "s/^${SEED_CONST%9;}9;\$/${SEED_CONST%9;}$n;/" $v.tmp > $v.ptx && rm $v.tmp
  [ "$(grep -cxF "${SEED_CONST%9;}$n;" $v.ptx)" = 1 ] || { echo "build.sh: seed $n not set in $v.ptx" >&2; exit 1; }
done
[ -f sm90_gemm_coop_2x1_seed5.ptx ] ||
  $NVCC -ptx -lineinfo -DSV_SEED=5 -Icutlass_seeded -o sm90_gemm_coop_2x1_seed5.ptx "$DATA/sm90_gemm_coop_2x1.cu"

# a cubin of each, with the line table of its .loc directives (for cuda-gdb)
for p in sm90_gemm_coop_*.ptx sm90_gemm_pingpong_*.ptx; do
  c=${p%.ptx}.cubin
  # (ptxas's C7510 notes -- wgmma serialized across a call -- go to the log, as for any build of this PTX)
  [ "$c" -nt "$p" ] || ptxas -arch=sm_90a -lineinfo -o "$c" "$p" 2> "${p%.ptx}.ptxas.log" ||
    { cat "${p%.ptx}.ptxas.log" >&2; exit 1; }
done

# the host programs
HOST="$NVCC -DSV_HOST_ONLY -I$CUTLASS/include -I$CUTLASS/tools/util/include -I$DATA"
[ gemm_run_2x1 -nt "$ROOT/bench/cutlass_gpu/gemm_run.cu" ] ||
  $HOST -o gemm_run_2x1 "$ROOT/bench/cutlass_gpu/gemm_run.cu"
[ gemm_run_1x1 -nt "$ROOT/bench/cutlass_gpu/gemm_run.cu" ] ||
  $HOST -DSV_CLUSTER_M=1 -o gemm_run_1x1 "$ROOT/bench/cutlass_gpu/gemm_run.cu"
[ gemm_run_1x1_s2 -nt "$ROOT/bench/cutlass_gpu/gemm_run.cu" ] ||
  $HOST -DSV_CLUSTER_M=1 -DSV_STAGES=2 -o gemm_run_1x1_s2 "$ROOT/bench/cutlass_gpu/gemm_run.cu"
for pp in 1x1 2x1; do  # the ping-pong GEMM's host programs: the same gemm_run.cu on its translation unit
  [ gemm_run_pp$pp -nt "$ROOT/bench/cutlass_gpu/gemm_run.cu" ] ||
    $HOST "-DSV_GEMM_TU=\"sm90_gemm_pingpong_$pp.cu\"" -o gemm_run_pp$pp "$ROOT/bench/cutlass_gpu/gemm_run.cu"
done
[ -f fields_1x1_s2 ] || $HOST -DSV_CLUSTER_M=1 -DSV_STAGES=2 -o fields_1x1_s2 "$DATA/sm90_gemm_coop_2x1_fields.cu"
[ -f fields_2x1 ] || $HOST -o fields_2x1 "$DATA/sm90_gemm_coop_2x1_fields.cu"
# seed 6 is in CUTLASS's host code (make_tma_copy_desc encodes B's multicast box whole): the kernel is the
# unseeded 2x1 cubin, and only this host program, which makes the Params and the TMA descriptors, is seeded
[ gemm_run_2x1_seed6 -nt "$ROOT/bench/cutlass_gpu/gemm_run.cu" ] ||
  $NVCC -DSV_HOST_ONLY -DSV_SEED=6 -Icutlass_seeded -I$CUTLASS/tools/util/include -I$DATA \
    -o gemm_run_2x1_seed6 "$ROOT/bench/cutlass_gpu/gemm_run.cu"


# what the two-stage variants need on the GPU machine, alone (about 3 MiB, to carry there by itself):
#   cutlass_run.py --build build/cutlass/s2 --only s2_
mkdir -p s2
for f in gemm_run_1x1_s2 sm90_gemm_coop_1x1_s2.cubin sm90_gemm_coop_1x1_s2_seed{2,3,5}.cubin; do
  [ s2/$f -nt $f ] || cp -p $f s2/$f
done
# and the 2x1 kernel with the host programs of its unseeded and seed-6 runs (cutlass_run.py --build
# build/cutlass/box --only coop_2x1,seed6_): the cubin is the unseeded PTX's, seed 6 being host code
mkdir -p box
for f in gemm_run_2x1 gemm_run_2x1_seed6 sm90_gemm_coop_2x1.cubin; do
  [ box/$f -nt $f ] || cp -p $f box/$f
done
# and the ping-pong GEMM (cutlass_run.py --build build/cutlass/pp --only pingpong_)
mkdir -p pp
for f in gemm_run_pp1x1 gemm_run_pp2x1 sm90_gemm_pingpong_1x1.cubin sm90_gemm_pingpong_2x1.cubin; do
  [ pp/$f -nt $f ] || cp -p $f pp/$f
done
ls -la "$OUT" "$OUT/s2" "$OUT/box" "$OUT/pp"
