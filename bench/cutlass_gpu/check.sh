#!/usr/bin/env bash
# The checker's verdict on one variant run by cutlass_run.py, at the launch the GPU runs (the fields of the
# Params that decide control flow computed by CUTLASS's host code, fields_2x1 from build.sh), as JSON beside
# the hardware record: bench/cutlass_gpu/checks/NAME.json.
# Usage: bench/cutlass_gpu/check.sh NAME PTX_STEM M N K [TIMEOUT_S]   (e.g. seed3_arrival_count_plus_one
#        sm90_gemm_coop_2x1_seed3 256 128 512 600)
#        FIELDS=fields_1x1_s2 for the two-stage 1x1 kernel (its Params fields and boxes from its own host code;
#        the fields file then carries that program's name, so the two kernels' fields at one size differ)
#        EXTRA="OPTIONS" appended to the fields program's options; a later --tensor-bytes for the same map
#        replaces its box (seed 6: EXTRA="--tensor-bytes 0[384]=16384", B's box whole)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build/cutlass}
NAME=$1 STEM=$2 M=$3 N=$4 K=$5 TIMEOUT=${6:-600}
FIELDS=${FIELDS:-fields_2x1}
BIN=fields_${M}x${N}x${K}.bin
[ "$FIELDS" = fields_2x1 ] || BIN=${FIELDS}_${M}x${N}x${K}.bin
cd "$BUILD"
read -r -a OPTS <<< "$(./"$FIELDS" "$M" "$N" "$K" 132 "$BIN" 2>/dev/null | tr -d "'")"
mkdir -p "$ROOT/bench/cutlass_gpu/checks"
start=$(date +%s)
set +e
PYTHONPATH=$ROOT python3 -m syncverify check "$STEM.ptx" "${OPTS[@]}" ${EXTRA:-} --fail-fast --format json -q \
  --timeout "$TIMEOUT" > "$ROOT/bench/cutlass_gpu/checks/$NAME.json"
rc=$?
set -e
# a deadlock: the waits it leaves blocked, with their CUTLASS call sites, for cutlass_run.py to set beside
# where cuda-gdb finds the hung kernel's warps (the sites come from the extracted protocol's comments)
if grep -q '"SV201"' "$ROOT/bench/cutlass_gpu/checks/$NAME.json"; then
  PYTHONPATH=$ROOT python3 -m syncverify extract "$STEM.ptx" "${OPTS[@]}" ${EXTRA:-} -o "$NAME.extracted.sync"
  python3 "$ROOT/bench/cutlass_gpu/hung_waits.py" "$ROOT/bench/cutlass_gpu/checks/$NAME.json" \
    "$NAME.extracted.sync" > "$ROOT/bench/cutlass_gpu/checks/$NAME.waits.json"
fi
echo "$NAME: exit $rc after $(( $(date +%s) - start )) s: python3 -m syncverify check $STEM.ptx ${OPTS[*]} ${EXTRA:-} --fail-fast --format json -q --timeout $TIMEOUT" \
  | tee -a "$ROOT/bench/cutlass_gpu/checks/commands.txt"
