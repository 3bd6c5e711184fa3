/*
 * The value of one MPI_T performance variable of this process, by name (Protean's
 * protean_chan_* and others), for the tests and the benchmarks (bench/ includes it as
 * "../tests/pvar.h"). Needs only <mpi.h> and <string.h>; MPI must be initialized.
 */
#ifndef PROTEAN_TESTS_PVAR_H
#define PROTEAN_TESTS_PVAR_H

#include <mpi.h>
#include <stdio.h>
#include <string.h>

/* The variable's value (a scalar counter or level); -1 where the MPI has no variable so
 * named. Opens and closes its own MPI_T session. */
static long long tu_pvar(const char *want)
{
    int n = 0, idx = -1, provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_pvar_get_num(&n);
    for (int i = 0; i < n && idx < 0; i++) {
        char name[256], desc[1024];
        int nl = sizeof name, dl = sizeof desc, verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_pvar_get_info(i, name, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind, &ro,
                                &cont, &atomic) == MPI_SUCCESS &&
            strcmp(name, want) == 0)
            idx = i;
    }
    long long r = -1;
    if (idx >= 0) {
        MPI_T_pvar_session s;
        MPI_T_pvar_handle h;
        int count;
        unsigned long long v = 0;
        MPI_T_pvar_session_create(&s);
        MPI_T_pvar_handle_alloc(s, idx, NULL, &h, &count);
        MPI_T_pvar_read(s, h, &v);
        MPI_T_pvar_handle_free(s, &h);
        MPI_T_pvar_session_free(&s);
        r = (long long)v;
    }
    MPI_T_finalize();
    return r;
}

/* The channel counters summed over the ranks of MPI_COMM_WORLD (collective), for the channel
 * benchmarks: rank 0 prints "fast_share F" (frames that arrived through fast channels over all
 * frames) and "promotions N demotions N". Only under Protean (MPICH 4.0.2 crashes in
 * MPI_T_pvar_get_num after MPI_T_init_thread in these programs); others print nothing. */
static void tu_print_channel_share(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen, rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Get_library_version(lib, &liblen);
    long long v[4] = {-1, -1, -1, -1}, sum[4];
    if (strstr(lib, "Protean")) {
        v[0] = tu_pvar("protean_chan_fast_frames_recvd");
        v[1] = tu_pvar("protean_chan_shared_frames_recvd");
        v[2] = tu_pvar("protean_chan_promotions");
        v[3] = tu_pvar("protean_chan_demotions");
    }
    MPI_Reduce(v, sum, 4, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && v[0] >= 0 && v[1] >= 0) {
        double tot = (double)(sum[0] + sum[1]);
        printf("fast_share %.4f\n", tot > 0 ? (double)sum[0] / tot : 0.0);
        printf("promotions %lld demotions %lld\n", sum[2], sum[3]);
    }
}

#endif
