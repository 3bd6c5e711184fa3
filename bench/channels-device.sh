#!/usr/bin/env bash
# The dynamic fast channels (issue 22) on the 16-core benchmark machine
# (../shared/device/README.md). Prepare here, run there:
#
#   make && ../shared/device/prepare target/device && cp bench/*-device.sh bench/p2p.rules target/device/
#   # on the 16-core machine, from the project root:
#   bash target/device/channels-device.sh 16          # about a minute
#
# What bench/dynpeers-run does here, without Python: bench/dynpeers.c (two peers that change each
# phase) and bench/amr.c (a moving refined region) at N ranks, every rank pinned to its own CPU,
# one line per rule:
#   static    every local peer gets a dedicated ring when all fit (shm_fast_channels), else none
#   all       a ring for every peer (shm_fast_channels=N, static rule)
#   online    the default: rings promoted to busy peers, idle ones taken back
#   profile   a schedule from a profile of a run with the same input (protean-prof analyze)
#   other     the same from a run with another input
#   mpich, ompi
# Each line: rule time_s fast_share. Then the small collectives with and without a ring per peer
# (NO_COLLS=1 skips them). DYN_MSGS, DYN_K and AMR_MSGS change the sizes (see the end).
set -u
D=$(cd "$(dirname "$0")" && pwd)
[ -f "$D/run.sh" ] || { echo "channels-device.sh: copy me into the folder ../shared/device/prepare made" >&2; exit 2; }
[ -f "$D/p2p.rules" ] || { echo "channels-device.sh: copy bench/p2p.rules next to me" >&2; exit 2; }
# shellcheck disable=SC1090
source <(sed '/^echo "== \$(grep PRETTY/,$d' "$D/run.sh")
cd "$D"
N=${1:-16}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
res() { grep -E '^(time_s|fast_share) ' | tr '\n' ' '; echo; }
bench() {  # bench NAME ARGS... (same input) ; OTHER_ARGS in $OTHER
    local prog=$1; shift
    PROTEAN_PROFILE=$T/$prog-same prot "$N" "$prog" "$@" >/dev/null 2>&1
    PROTEAN_PROFILE=$T/$prog-other prot "$N" "$prog" "${OTHER[@]}" >/dev/null 2>&1
    "$D/protean/bin/protean-prof" analyze "$T/$prog-same" -o "$T/$prog-same.sched" >/dev/null 2>&1 || echo "(analyze same failed)"
    "$D/protean/bin/protean-prof" analyze "$T/$prog-other" -o "$T/$prog-other.sched" >/dev/null 2>&1 || echo "(analyze other failed)"
    for run in $(seq "${RUNS:-2}"); do
        echo "-- $prog np=$N $* (run $run)"
        printf 'static  '; PROTEAN_CHAN_POLICY=static prot "$N" "$prog" "$@" 2>&1 | res
        printf 'all     '; PROTEAN_CHAN_POLICY=static PROTEAN_SHM_FAST_CHANNELS=$N prot "$N" "$prog" "$@" 2>&1 | res
        printf 'online  '; PROTEAN_CHAN_POLICY=online prot "$N" "$prog" "$@" 2>&1 | res
        printf 'profile '; PROTEAN_CHAN_POLICY=static PROTEAN_SCHEDULE=$T/$prog-same.sched prot "$N" "$prog" "$@" 2>&1 | res
        printf 'other   '; PROTEAN_CHAN_POLICY=static PROTEAN_SCHEDULE=$T/$prog-other.sched prot "$N" "$prog" "$@" 2>&1 | res
        printf 'mpich   '; mpich "$N" "$prog" "$@" 2>&1 | res
        printf 'ompi    '; ompi "$N" "$prog" "$@" 2>&1 | res
    done
}
echo "== $(grep PRETTY /etc/os-release) $(nproc) CPUs"
SECONDS=0
# Messages per peer and phase (dynpeers) and per face and step (amr); peers per phase (dynpeers -k).
for m in ${DYN_MSGS:-50 200}; do
    OTHER=(-P 12 -m $((m / 4)) -s 512 -k "${DYN_K:-2}"); bench dynpeers -P 12 -m "$m" -k "${DYN_K:-2}"
done
for m in ${AMR_MSGS:-10}; do
    OTHER=(-T 48 -R 4 -m $(((m + 3) / 4)) -s 512 -S 2); bench amr -T 48 -R 4 -m "$m"
done
[ -n "${NO_COLLS:-}" ] && { echo "== done in ${SECONDS}s"; exit 0; }
for c in barrier bcast allreduce allgather alltoall; do
    echo "-- $c np=$N rings: default / one per peer (shm collectives off, then on)"
    for fc in 8 "$N"; do
        printf 'p2p fast=%-3s ' "$fc"; PROTEAN_SHM_FAST_CHANNELS=$fc PROTEAN_COLL_DECISION_FILE=$D/p2p.rules prot "$N" "$c" -s 8 2>&1 | grep -E '^[0-9]+ ' | tr '\n' ' '; echo
        printf 'def fast=%-3s ' "$fc"; PROTEAN_SHM_FAST_CHANNELS=$fc prot "$N" "$c" -s 8 2>&1 | grep -E '^[0-9]+ ' | tr '\n' ' '; echo
    done
done
echo "== done in ${SECONDS}s"
