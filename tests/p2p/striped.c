/*
 * Large messages as striping cuts them: every byte of messages that a library may spread over
 * several connections to one peer (Protean's TCP lanes) arrives in place, whatever order the
 * pieces land in. Pairs (0,1), (2,3), ...; alone, a rank sends to itself.
 *
 *  1. odd sizes (not multiples of any piece size) at odd offsets into both buffers, received
 *     into a posted receive and, after a barrier, as unexpected messages;
 *  2. several large messages in flight both ways at once, received in reverse order of
 *     posting (distinct tags) and by MPI_ANY_SOURCE/MPI_ANY_TAG in order;
 *  3. a strided send (vector type) into a contiguous receive and the reverse;
 *  4. a receive buffer larger than the message: the bytes after the message stay untouched.
 *
 * With PROTEAN_TRANSPORTS=tcp and PROTEAN_TCP_LANES=N (N > 1) in the environment and Protean's
 * MPI_T variable protean_tcp_lane1_bytes_sent present, a rank that sent to another also checks
 * that lane 1 carried data: the run did stripe.
 */
#include "util.h"

static const size_t SIZES[] = {(1u << 20) + 13, (3u << 20) + 1, (8u << 20) + 4093,
                               (256u << 10) + 7, (17u << 20) + 5};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define NFLIGHT 4

static unsigned long long pvar_read(const char *want, int *found)
{
    int n = 0, idx = -1;
    unsigned long long v = 0;
    *found = 0;
    MPI_T_pvar_get_num(&n);
    for (int i = 0; i < n; i++) {
        char name[256], desc[1024];
        int nl = sizeof name, dl = sizeof desc, verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_pvar_get_info(i, name, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind, &ro,
                                &cont, &atomic) == MPI_SUCCESS &&
            strcmp(name, want) == 0)
            idx = i;
    }
    if (idx < 0)
        return 0;
    MPI_T_pvar_session s;
    MPI_T_pvar_handle h;
    int count;
    MPI_T_pvar_session_create(&s);
    MPI_T_pvar_handle_alloc(s, idx, NULL, &h, &count);
    MPI_T_pvar_read(s, h, &v);
    MPI_T_pvar_handle_free(s, &h);
    MPI_T_pvar_session_free(&s);
    *found = 1;
    return v;
}

int main(int argc, char **argv)
{
    MPI_Status st;
    MPI_Request r[2 * NFLIGHT];
    int partner, provided;
    size_t maxn = (17u << 20) + 5, k;
    unsigned char *s, *d;

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    tu_init(&argc, &argv);
    partner = tu_partner();
    s = tu_malloc(maxn + 128);
    d = tu_malloc(maxn + 128);

    /* 1. Odd sizes at odd offsets, posted then unexpected. */
    for (k = 0; k < NSIZES; k++) {
        size_t n = SIZES[k];
        for (int unexpected = 0; unexpected < 2; unexpected++) {
            int tag = (int)(10 + 2 * k + unexpected);
            tu_fill(s + 3, n, TU_SEED(tu_rank, partner, tag));
            memset(d, 0xA5, maxn + 128);
            if (unexpected) {
                CHECK_MPI(MPI_Isend(s + 3, (int)n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r[0]));
                /* The partner's message is on its way before this rank posts the receive. */
                CHECK_MPI(MPI_Probe(partner, tag, MPI_COMM_WORLD, &st));
                CHECK_MPI(MPI_Recv(d + 5, (int)n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
            } else {
                CHECK_MPI(MPI_Irecv(d + 5, (int)n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r[1]));
                CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
                CHECK_MPI(MPI_Isend(s + 3, (int)n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r[0]));
                CHECK_MPI(MPI_Wait(&r[1], &st));
            }
            CHECK_MPI(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
            CHECK_STATUS(st, MPI_BYTE, partner, tag, (int)n);
            CHECK_BYTES(d, 5, 0xA5);
            CHECK_BUF(d + 5, n, TU_SEED(partner, tu_rank, tag));
            CHECK_BYTES(d + 5 + n, 64 - 5, 0xA5);
        }
    }

    /* 2. Several messages in flight both ways; receives posted in reverse order. */
    {
        size_t n = (2u << 20) + 111;
        unsigned char *sb = tu_malloc(NFLIGHT * n), *db = tu_malloc(NFLIGHT * n);
        for (int i = 0; i < NFLIGHT; i++)
            tu_fill(sb + i * n, n, TU_SEED(tu_rank, partner, 100 + i));
        for (int i = NFLIGHT - 1; i >= 0; i--)
            CHECK_MPI(MPI_Irecv(db + i * n, (int)n, MPI_BYTE, partner, 100 + i, MPI_COMM_WORLD,
                                &r[i]));
        for (int i = 0; i < NFLIGHT; i++)
            CHECK_MPI(MPI_Isend(sb + i * n, (int)n, MPI_BYTE, partner, 100 + i, MPI_COMM_WORLD,
                                &r[NFLIGHT + i]));
        CHECK_MPI(MPI_Waitall(2 * NFLIGHT, r, MPI_STATUSES_IGNORE));
        for (int i = 0; i < NFLIGHT; i++)
            CHECK_BUF(db + i * n, n, TU_SEED(partner, tu_rank, 100 + i));

        /* The same by wildcard: matched in the order sent. */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int i = 0; i < NFLIGHT; i++)
            CHECK_MPI(MPI_Isend(sb + i * n, (int)n, MPI_BYTE, partner, 100 + i, MPI_COMM_WORLD,
                                &r[i]));
        for (int i = 0; i < NFLIGHT; i++) {
            CHECK_MPI(MPI_Recv(db, (int)n, MPI_BYTE, tu_size > 2 ? partner : MPI_ANY_SOURCE,
                               MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHECK_STATUS(st, MPI_BYTE, partner, 100 + i, (int)n);
            CHECK_BUF(db, n, TU_SEED(partner, tu_rank, 100 + i));
        }
        CHECK_MPI(MPI_Waitall(NFLIGHT, r, MPI_STATUSES_IGNORE));
        free(sb);
        free(db);
    }

    /* 3. Strided: 8 MiB of data as every other block of 40 bytes, sent strided and received
     * contiguous, then sent contiguous and received strided. */
    {
        int nblk = (8 << 20) / 40;
        size_t span = (size_t)nblk * 80;
        unsigned char *st_s = tu_malloc(span), *st_d = tu_malloc(span);
        unsigned char *cont = tu_malloc((size_t)nblk * 40);
        MPI_Datatype vec;
        CHECK_MPI(MPI_Type_vector(nblk, 40, 80, MPI_BYTE, &vec));
        CHECK_MPI(MPI_Type_commit(&vec));
        tu_fill(st_s, span, TU_SEED(tu_rank, partner, 200));
        CHECK_MPI(MPI_Sendrecv(st_s, 1, vec, partner, 200, cont, nblk * 40, MPI_BYTE, partner, 200,
                               MPI_COMM_WORLD, &st));
        CHECK_STATUS(st, MPI_BYTE, partner, 200, nblk * 40);
        {
            unsigned char *want = tu_malloc(span);
            tu_fill(want, span, TU_SEED(partner, tu_rank, 200));
            for (int b = 0; b < nblk; b++)
                if (memcmp(cont + (size_t)b * 40, want + (size_t)b * 80, 40) != 0)
                    TU_FAIL("strided message: block %d of %d differs", b, nblk);
            free(want);
        }
        tu_fill(cont, (size_t)nblk * 40, TU_SEED(tu_rank, partner, 201));
        memset(st_d, 0x5A, span);
        CHECK_MPI(MPI_Sendrecv(cont, nblk * 40, MPI_BYTE, partner, 201, st_d, 1, vec, partner, 201,
                               MPI_COMM_WORLD, &st));
        {
            unsigned char *want = tu_malloc((size_t)nblk * 40);
            tu_fill(want, (size_t)nblk * 40, TU_SEED(partner, tu_rank, 201));
            for (int b = 0; b < nblk; b++) {
                if (memcmp(st_d + (size_t)b * 80, want + (size_t)b * 40, 40) != 0)
                    TU_FAIL("strided receive: block %d of %d differs", b, nblk);
                CHECK_BYTES(st_d + (size_t)b * 80 + 40, 40, 0x5A);
            }
            free(want);
        }
        CHECK_MPI(MPI_Type_free(&vec));
        free(st_s);
        free(st_d);
        free(cont);
    }

    /* Did it stripe? Only where the library says it can and the run asked for lanes. */
    {
        const char *lanes = getenv("PROTEAN_TCP_LANES"), *tr = getenv("PROTEAN_TRANSPORTS");
        int found = 0;
        unsigned long long on1 = pvar_read("protean_tcp_lane1_bytes_sent", &found);
        if (found && lanes && atoi(lanes) > 1 && tr && strcmp(tr, "tcp") == 0 &&
            partner != tu_rank)
            CHECK_MSG(on1 > 0, "PROTEAN_TCP_LANES=%s, yet lane 1 carried no data", lanes);
        TU_LOG("lane 1 carried %llu bytes", on1);
    }

    free(s);
    free(d);
    MPI_T_finalize();
    return tu_finish();
}
