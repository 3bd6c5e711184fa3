#!/usr/bin/env bash
# protean-tune on the 16-core benchmark machine (../shared/device/README.md), where no compiler
# is at hand: it runs the MPICH-built bench programs that prepare made (--bin), every rank bound
# to its own CPU (--wrap bench/pin). Prepare here, run there:
#
#   make && ../shared/device/prepare target/device && cp bench/*-device.sh target/device/
#   # there, from the project root:  bash target/device/tune-device.sh OUTDIR [RANKS] [RUNS]
#
# Writes OUTDIR/tune.rules (the decision file), OUTDIR/tune.txt (the report: auto against the
# best algorithm per size) and OUTDIR/tune-v.txt (every measurement, as they come).
# TUNE_ARGS adds arguments (--quick, --colls ...); TUNE_LIMIT (s, default 600) bounds the run.
set -u
D=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: tune-device.sh OUTDIR [RANKS] [RUNS]}
mkdir -p "$OUT" "$D/tunebin"
for c in barrier bcast reduce allreduce allgather alltoall; do
    ln -sf "$D/bin/$c.mpich" "$D/tunebin/$c"
done
echo "== $(grep PRETTY /etc/os-release) $(nproc) CPUs, start $(date +%T)" | tee "$OUT/tune.txt"
SECONDS=0
LD_LIBRARY_PATH=$D/protean/lib timeout "${TUNE_LIMIT:-600}" "$D/protean/bin/protean-tune" \
    --bin "$D/tunebin" --wrap "$D/pin" -n "${2:-4,8,16}" --runs "${3:-2}" \
    ${TUNE_ARGS:-} -o "$OUT/tune.rules" -v 2> >(tee "$OUT/tune-v.txt" >&2) | tee -a "$OUT/tune.txt"
echo "== done in ${SECONDS}s" | tee -a "$OUT/tune.txt"
