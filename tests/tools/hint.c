/*
 * The protean_protocol info hint: a communicator's point-to-point sends use the protocol
 * setting it names, whatever the process's setting (PROTEAN_PROTOCOL), while other
 * communicators keep the process's. Counted with the MPI_T performance variables
 * protean_eager_sent and protean_rndv_sent. MPI_Comm_get_info reports the hint; a value that
 * names no protocol is ignored. Pairs (0,1), (2,3), ...; an unpaired rank talks to itself.
 */
#include "util.h"

#define N 16

static int pvar(const char *want)
{
    int n = 0, i;
    CHECK_MPI(MPI_T_pvar_get_num(&n));
    for (i = 0; i < n; i++) {
        char name[256];
        int nlen = sizeof name, verb, cls, bind, ro, cont, atom;
        MPI_Datatype dt;
        MPI_T_enum en;
        CHECK_MPI(MPI_T_pvar_get_info(i, name, &nlen, &verb, &cls, &dt, &en, NULL, NULL, &bind,
                                      &ro, &cont, &atom));
        if (!strcmp(name, want))
            return i;
    }
    TU_FAIL("no performance variable %s", want);
}

static MPI_T_pvar_session sess;
static MPI_T_pvar_handle eh, rh, sh;

/* Messages sent by eager, and by rendezvous or eager-rendezvous (both start with a
 * request-to-send). */
static void counts(unsigned long long *eager, unsigned long long *rndv)
{
    unsigned long long split;
    CHECK_MPI(MPI_T_pvar_read(sess, eh, eager));
    CHECK_MPI(MPI_T_pvar_read(sess, rh, rndv));
    CHECK_MPI(MPI_T_pvar_read(sess, sh, &split));
    *rndv += split;
}

/* N small messages to the partner and back on comm; returns how many this rank sent by
 * each protocol. */
static void traffic(MPI_Comm comm, int partner, unsigned long long *de, unsigned long long *dr)
{
    unsigned long long e0, r0, e1, r1;
    int i, me, buf[2] = {0, 0}, in[2];
    MPI_Comm_rank(comm, &me);
    counts(&e0, &r0);
    for (i = 0; i < N; i++) {
        MPI_Request rq[2];
        buf[0] = i;
        CHECK_MPI(MPI_Irecv(in, 2, MPI_INT, partner, i, comm, &rq[0]));
        CHECK_MPI(MPI_Isend(buf, 2, MPI_INT, partner, i, comm, &rq[1]));
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        CHECK_EQ(in[0], i);
        CHECK_MPI(MPI_Sendrecv(buf, 1, MPI_INT, partner, 100 + i, in, 1, MPI_INT, partner,
                               100 + i, comm, MPI_STATUS_IGNORE));
    }
    counts(&e1, &r1);
    *de = e1 - e0;
    *dr = r1 - r0;
}

static void check_hint(MPI_Comm c, const char *want)
{
    MPI_Info used;
    char v[64];
    int flag = 0;
    CHECK_MPI(MPI_Comm_get_info(c, &used));
    CHECK_MPI(MPI_Info_get_string(used, "protean_protocol", &(int){sizeof v}, v, &flag));
    CHECK(flag);
    CHECK_MSG(!strcmp(v, want), "protean_protocol is '%s', expected '%s'", v, want);
    MPI_Info_free(&used);
}

int main(int argc, char **argv)
{
    int rank, size, partner, provided, count;
    unsigned long long de, dr;
    MPI_Comm rcomm, ecomm, bad;
    MPI_Info info;

    tu_init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = rank ^ 1;
    if (partner >= size)
        partner = rank;
    CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    CHECK_MPI(MPI_T_pvar_session_create(&sess));
    CHECK_MPI(MPI_T_pvar_handle_alloc(sess, pvar("protean_eager_sent"), NULL, &eh, &count));
    CHECK_MPI(MPI_T_pvar_handle_alloc(sess, pvar("protean_rndv_sent"), NULL, &rh, &count));
    CHECK_MPI(MPI_T_pvar_handle_alloc(sess, pvar("protean_split_sent"), NULL, &sh, &count));

    /* Rendezvous for every message on rcomm (a dup with the hint). */
    MPI_Info_create(&info);
    MPI_Info_set(info, "protean_protocol", "rendezvous");
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &rcomm));
    MPI_Info_free(&info);
    check_hint(rcomm, "rendezvous");
    traffic(rcomm, partner, &de, &dr);
    CHECK_MSG(de == 0 && dr == 2 * N, "hinted rendezvous: %llu eager, %llu rndv", de, dr);

    /* Eager for every message on ecomm (hint set after creation). */
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &ecomm));
    MPI_Info_create(&info);
    MPI_Info_set(info, "protean_protocol", "eager");
    CHECK_MPI(MPI_Comm_set_info(ecomm, info));
    MPI_Info_free(&info);
    check_hint(ecomm, "eager");
    traffic(ecomm, partner, &de, &dr);
    CHECK_MSG(de == 2 * N && dr == 0, "hinted eager: %llu eager, %llu rndv", de, dr);

    /* A dup inherits the hint; MPI_COMM_WORLD keeps the process's setting (whichever it is,
     * these 8-byte messages travel as on any communicator without the hint: not all by
     * rendezvous unless the process forces it). */
    MPI_Comm_free(&rcomm);
    CHECK_MPI(MPI_Comm_dup(ecomm, &rcomm));
    traffic(rcomm, partner, &de, &dr);
    CHECK_MSG(de == 2 * N && dr == 0, "inherited eager hint: %llu eager, %llu rndv", de, dr);

    /* A value that names no protocol is ignored. */
    MPI_Info_create(&info);
    MPI_Info_set(info, "protean_protocol", "fastest");
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &bad));
    MPI_Info_free(&info);
    traffic(bad, partner, &de, &dr);
    CHECK_INT((int)(de + dr), ==, 2 * N);

    MPI_Comm_free(&bad);
    MPI_Comm_free(&rcomm);
    MPI_Comm_free(&ecomm);
    CHECK_MPI(MPI_T_pvar_handle_free(sess, &eh));
    CHECK_MPI(MPI_T_pvar_handle_free(sess, &rh));
    CHECK_MPI(MPI_T_pvar_handle_free(sess, &sh));
    CHECK_MPI(MPI_T_pvar_session_free(&sess));
    CHECK_MPI(MPI_T_finalize());
    return tu_finish();
}
