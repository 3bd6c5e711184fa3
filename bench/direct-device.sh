#!/usr/bin/env bash
# Issue 27 on the 16-core benchmark machine (../shared/device/README.md): the shared-memory
# allgather and alltoall reading every block straight from its sender (coll_shm_direct_from),
# the scatter whose members skip the ring wait, and every collective at 16 ranks beside MPICH
# and Open MPI. Prepare here (main's library for the A/B in protean-main/lib):
#
#   make && ../shared/device/prepare target/device && cp bench/*-device.sh bench/p2p.rules target/device/
#   mkdir -p target/device/protean-main/lib && cp -a MAIN_BUILD/lib/libmpi* target/device/protean-main/lib/
#   # there, from the project root:  bash target/device/direct-device.sh [LOG]
#
# SECTIONS (default "direct scatter all") picks the parts: direct (alltoall and allgather at
# 4 KiB-1 MiB with each algorithm, 2 rounds), scatter (main against this build, 3 rounds),
# all (every collective at 8 B-1 MiB, 2 rounds), probe (16 ranks: ring depth and forced
# algorithms for the rows still behind, 2 rounds; not in the default); NPS (default "16 8") the rank counts of
# direct and all.
# Lines: "<coll> <row> size:median ..." (microseconds, median of the program's repetitions,
# slowest rank); rows: ompi, mpich, main (protean-main's library), new (this build), new with
# an algorithm forced (new:ALG) or with direct reads from 1 byte (new:shm-direct).
set -u
D=$(cd "$(dirname "$0")" && pwd)
LOG=${1:-/dev/null}
# shellcheck disable=SC1090
source <(sed '/^echo "== \$(grep PRETTY/,$d' "$D/run.sh")
cd "$D"
protm() { LD_LIBRARY_PATH=$D/protean-main/lib timeout 120 "$D/protean/bin/mpirun" -n "$1" "$D/pin" "$D/bin/$2.mpich" "${@:3}"; }
# row LABEL COLL NP LAUNCHER [ENV=VALUE ...] -- ARGS: one line of size:median pairs.
row() {
    local label=$1 c=$2 np=$3 m=$4; shift 4
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local out
    out=$(for kv in "${envs[@]}"; do export "${kv?}"; done; "$m" "$np" "$c" "$@" 2>&1)
    local res
    res=$(grep -E '^[0-9]+ ' <<<"$out" | awk '{printf "%s:%s ", $1, $2}')
    [ -n "$res" ] || res="(failed) $(grep -vE 'pmix|Perhaps|dlopen' <<<"$out" | tail -n 2 | tr '\n' ' ')"
    printf '%-9s %-18s %s\n' "$c" "$label" "$res" | tee -a "$LOG"
}
say() { echo "$*" | tee -a "$LOG"; }
say "== $(grep PRETTY /etc/os-release) $(nproc) CPUs, start $(date +%T)"
SECONDS=0
has() { [[ " ${SECTIONS:-direct scatter all} " == *" $1 "* ]]; }
has direct && for round in 1 2; do
    for np in ${NPS:-16 8}; do
        say "==== direct reads, round $round np=$np at ${SECONDS}s"
        S=(-s 4k,16k,64k,256k,1M)
        for m in ompi mpich protm prot; do row "$m" alltoall $np $m -- "${S[@]}"; done
        row new:shm-direct alltoall $np prot PROTEAN_COLL_ALLTOALL=shm PROTEAN_COLL_SHM_DIRECT_FROM=1 -- "${S[@]}"
        row new:linear alltoall $np prot PROTEAN_COLL_ALLTOALL=linear -- "${S[@]}"
        row new:pairwise alltoall $np prot PROTEAN_COLL_ALLTOALL=pairwise -- "${S[@]}"
        S=(-s 16k,64k,256k,1M)
        for m in ompi mpich protm prot; do row "$m" allgather $np $m -- "${S[@]}"; done
        row new:shm-areas allgather $np prot PROTEAN_COLL_ALLGATHER=shm -- "${S[@]}"
        row new:shm-direct allgather $np prot PROTEAN_COLL_ALLGATHER=shm PROTEAN_COLL_SHM_DIRECT_FROM=1 -- "${S[@]}"
        row new:ring allgather $np prot PROTEAN_COLL_ALLGATHER=ring -- "${S[@]}"
    done
done
has scatter && for round in 1 2 3; do
    say "==== scatter without the members' ring wait, round $round np=16 at ${SECONDS}s"
    for m in ompi protm prot; do row "$m" scatter "${NBIG:-16}" $m -- -s 8,256,1k,4k; done
done
has all && for round in 1 2; do
    for np in ${NPS:-16 8}; do
        say "==== every collective, round $round np=$np at ${SECONDS}s"
        for c in barrier bcast reduce allreduce allgather alltoall gather scatter; do
            S=(-s 8,1k,16k,64k,1M)
            [ $c = barrier ] && S=()
            for m in ompi mpich protm prot; do row "$m" $c "$np" $m -- "${S[@]}"; done
        done
    done
done
# probe: where the remaining rows at 16 ranks might go (ring depth, forced algorithms).
has probe && for round in 1 2; do
    say "==== probe, round $round np=16 at ${SECONDS}s"
    S=(-s 256k,1M)
    for m in ompi mpich prot; do row "$m" allgather 16 $m -- "${S[@]}"; done
    for d in 4 8; do row new:depth$d allgather 16 prot PROTEAN_COLL_SHM_DEPTH=$d -- "${S[@]}"; done
    S=(-s 1k,1M)
    for m in ompi mpich prot; do row "$m" allreduce 16 $m -- "${S[@]}"; done
    row new:shm allreduce 16 prot PROTEAN_COLL_ALLREDUCE=shm -- "${S[@]}"
    row new:shm-depth4 allreduce 16 prot PROTEAN_COLL_ALLREDUCE=shm PROTEAN_COLL_SHM_DEPTH=4 -- "${S[@]}"
    row new:rd allreduce 16 prot PROTEAN_COLL_ALLREDUCE=recursive_doubling -- "${S[@]}"
    row new:rabenseifner allreduce 16 prot PROTEAN_COLL_ALLREDUCE=rabenseifner -- "${S[@]}"
    for m in ompi prot; do row "$m" reduce 16 $m -- -s 1k; done
    row new:binomial reduce 16 prot PROTEAN_COLL_REDUCE=binomial -- -s 1k
    S=(-s 8,1k,64k)
    for m in ompi mpich prot; do row "$m" scatter 16 $m -- "${S[@]}"; done
    row new:linear scatter 16 prot PROTEAN_COLL_SCATTER=linear -- "${S[@]}"
    row new:shm scatter 16 prot PROTEAN_COLL_SCATTER=shm -- "${S[@]}"
    row new:fastch16 scatter 16 prot PROTEAN_SHM_FAST_CHANNELS=16 -- "${S[@]}"
    for m in ompi prot; do row "$m" gather 16 $m -- -s 8; done
    row new:linear gather 16 prot PROTEAN_COLL_GATHER=linear -- -s 8
    S=(-s 64k,1M)
    for m in mpich prot; do row "$m" alltoall 16 $m -- "${S[@]}"; done
    row new:shm-direct alltoall 16 prot PROTEAN_COLL_ALLTOALL=shm -- "${S[@]}"
done
say "== done in ${SECONDS}s"
