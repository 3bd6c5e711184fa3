/*
 * The job that tests/security/attack attacks: ranks pass checksummed messages of several
 * sizes around a ring and exchange pairwise for a few seconds, then print one digest line per
 * rank (the same in every run) on stdout. On stderr each rank reports how many connections
 * and datagrams its transports refused (the MPI_T variables protean_rejected_connections and
 * protean_rejected_datagrams, summed), so the attacker can tell its attacks arrived.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t mix(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static unsigned long long rejected(void)
{
    int n, provided, idx[2] = {-1, -1};
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_pvar_get_num(&n);
    for (int i = 0; i < n; i++) {
        char name[256], desc[1024];
        int nl = sizeof name, dl = sizeof desc, verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        MPI_T_pvar_get_info(i, name, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind, &ro, &cont,
                            &atomic);
        if (strcmp(name, "protean_rejected_connections") == 0)
            idx[0] = i;
        if (strcmp(name, "protean_rejected_datagrams") == 0)
            idx[1] = i;
    }
    if (idx[0] < 0 || idx[1] < 0)
        return (unsigned long long)-1;
    MPI_T_pvar_session s;
    unsigned long long sum = 0;
    MPI_T_pvar_session_create(&s);
    for (int k = 0; k < 2; k++) {
        MPI_T_pvar_handle h;
        int count;
        unsigned long long v = 0;
        MPI_T_pvar_handle_alloc(s, idx[k], NULL, &h, &count);
        MPI_T_pvar_read(s, h, &v);
        MPI_T_pvar_handle_free(s, &h);
        sum += v;
    }
    MPI_T_pvar_session_free(&s);
    MPI_T_finalize();
    return sum;
}

int main(int argc, char **argv)
{
    int rank, size, rounds = argc > 1 ? atoi(argv[1]) : 300;
    static unsigned char out[1 << 20], in[1 << 20];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    uint64_t h = 14695981039346656037ull;
    const int sizes[] = {8, 1000, 70000, 1 << 20};
    for (int r = 0; r < rounds; r++) {
        int len = sizes[r % 4];
        for (int i = 0; i < len; i++)
            out[i] = (unsigned char)(r * 31 + rank * 7 + i);
        int to = (rank + 1) % size, from = (rank + size - 1) % size;
        MPI_Sendrecv(out, len, MPI_BYTE, to, r, in, len, MPI_BYTE, from, r, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (int i = 0; i < len; i++)
            if (in[i] != (unsigned char)(r * 31 + from * 7 + i)) {
                fprintf(stderr, "rank %d: round %d: byte %d corrupt\n", rank, r, i);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        h = mix(h, in, len);
        if (r % 30 == 0)
            usleep(10000); /* leave the attacker time to act while connections are open */
    }
    uint64_t all = h;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
    printf("rank %d digest %016llx job %016llx\n", rank, (unsigned long long)h,
           (unsigned long long)all);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    fprintf(stderr, "rank %d rejected %llu\n", rank, rejected());
    MPI_Finalize();
    return 0;
}
