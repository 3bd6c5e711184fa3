#!/usr/bin/env bash
# The shared-memory collectives (issue 27) on the 16-core benchmark machine
# (../shared/device/README.md). Prepare here, run there:
#
#   make && ../shared/device/prepare target/device && cp bench/*-device.sh bench/p2p.rules target/device/
#   # on the 16-core machine, from the project root:
#   bash target/device/shmcoll-device.sh 16          # about 5 minutes
#
# For barrier, bcast, reduce, allreduce, allgather, alltoall, gather and scatter at 2, 8 and N ranks (every rank pinned to its own CPU,
# as in run.sh), five rows per collective, in one run:
#   prot      Protean as built (the built-in table: shm where its rules say)
#   prot-shm  Protean with the shared-memory algorithm forced at every size (PROTEAN_COLL_<C>=shm)
#   prot-shm-depth4  (bcast, 64 KiB to 4 MiB) the same with a ring of 4 areas per member
#             (coll_shm_depth=4: four chunks of a large call in flight instead of 2)
#   prot-shm-areas  (reduce, allreduce, 64 KiB to 4 MiB) shm forced through the areas only
#             (coll_shm_reduce_direct=0: no direct reads and writes of the members' buffers)
#   prot-p2p  Protean without it: a decision file with the point-to-point rules of the built-in
#             table (what main chose before the shm rules)
#   mpich, ompi
# Each line: size median min max iterations (microseconds). The rows say where the shm rules'
# size limits belong at 16 ranks (the first choices were made on 2 cores).
set -u
D=$(cd "$(dirname "$0")" && pwd)
[ -f "$D/run.sh" ] || { echo "shmcoll-device.sh: copy me into the folder ../shared/device/prepare made" >&2; exit 2; }
# The launchers (prot, mpich, ompi) and all3 of run.sh, without its list of runs.
# shellcheck disable=SC1090
source <(sed '/^echo "== \$(grep PRETTY/,$d' "$D/run.sh")
cd "$D"
[ -f "$D/p2p.rules" ] || { echo "shmcoll-device.sh: copy bench/p2p.rules next to me" >&2; exit 2; }
N=${1:-16}
echo "== $(grep PRETTY /etc/os-release) $(nproc) CPUs"
SECONDS=0
for np in ${NPS:-2 8 $N}; do
    for c in barrier bcast reduce allreduce allgather alltoall gather scatter; do
        S=(-s 8,1k,16k,32k,64k,256k,1M)
        [ "$c" = barrier ] && S=()
        all3 "$np" "$c" "${S[@]}"
        V=$(tr a-z A-Z <<<"$c")
        echo "-- $c np=$np prot-shm"
        ( export "PROTEAN_COLL_$V=shm"; prot "$np" "$c" "${S[@]}" 2>&1 | grep -E '^[0-9]+ ' || echo "(failed)" )
        case $c in bcast)
            echo "-- $c np=$np prot-shm-depth4"
            ( export "PROTEAN_COLL_$V=shm" PROTEAN_COLL_SHM_DEPTH=4; prot "$np" "$c" -s 64k,256k,1M,4M 2>&1 | grep -E '^[0-9]+ ' || echo "(failed)" ) ;;
        reduce|allreduce)
            echo "-- $c np=$np prot-shm-areas"
            ( export "PROTEAN_COLL_$V=shm" PROTEAN_COLL_SHM_REDUCE_DIRECT=0; prot "$np" "$c" -s 64k,256k,1M,4M 2>&1 | grep -E '^[0-9]+ ' || echo "(failed)" ) ;;
        esac
        echo "-- $c np=$np prot-p2p"
        ( export PROTEAN_COLL_DECISION_FILE="$D/p2p.rules"; prot "$np" "$c" "${S[@]}" 2>&1 | grep -E '^[0-9]+ ' || echo "(failed)" )
    done
done
echo "== done in ${SECONDS}s"
