/*
 * Freeing an object that is still in use takes effect when the last use ends (MPI-4.1 2.5.1,
 * 5.1.9, 7.4.3, 7.7.2, 9.3): the operations and objects using it go on unaffected.
 *  1. a derived datatype freed between MPI_Send_init/MPI_Recv_init and MPI_Start (started
 *     three times), and while a nonblocking send and receive of it are in flight; an inactive
 *     persistent buffered send does not keep MPI_Buffer_detach waiting;
 *  2. a user reduction and a derived datatype freed while an MPI_Iallreduce uses them, and
 *     before MPI_Start of an MPI_Allreduce_init; another type created meanwhile does not take
 *     the freed type's handle: the user function still gets a handle of the right size;
 *  3. a communicator freed with a receive still pending on it: its context is not given to
 *     the next communicator (a message on the new one does not reach the old receive, which
 *     is then cancelled); MPI_Comm_disconnect waits for a pending send on it;
 *  4. keyvals freed while attributes use them: copy and delete callbacks still run on dup and
 *     free (communicators and datatypes); a delete callback that frees its keyval again
 *     (MPICH's keyval_double_free); a delete callback reads the attribute being deleted;
 *  5. a group, an error handler and an info object freed while a communicator created from
 *     or given them lives: the communicator keeps them.
 * Pairs (0,1), (2,3), ...; a rank without partner talks to itself. Any size >= 1.
 */
#include "util.h"

static int partner, self_only;
static int op_calls, op_size_ok = 1, expected_size;

/* a[i] + b[i] over ints; checks that the datatype handle it gets still has its size. */
static void sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int sz = -1, n, i;
    MPI_Type_size(*dt, &sz);
    if (sz != expected_size)
        op_size_ok = 0;
    n = *len * sz / (int)sizeof(int);
    for (i = 0; i < n; i++)
        ((int *)inout)[i] += ((int *)in)[i];
    op_calls++;
}

static int attr_counter;
static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c, (void)k, (void)extra;
    *(void **)out = in;
    *flag = 1;
    (*(int *)in)++;
    return MPI_SUCCESS;
}
static int del_fn(MPI_Comm c, int k, void *v, void *extra)
{
    (void)c, (void)k, (void)extra;
    (*(int *)v)--;
    return MPI_SUCCESS;
}
static int tcopy_fn(MPI_Datatype t, int k, void *extra, void *in, void *out, int *flag)
{
    (void)t, (void)k, (void)extra;
    *(void **)out = in;
    *flag = 1;
    (*(int *)in)++;
    return MPI_SUCCESS;
}
static int tdel_fn(MPI_Datatype t, int k, void *v, void *extra)
{
    (void)t, (void)k, (void)extra;
    (*(int *)v)--;
    return MPI_SUCCESS;
}
/* Frees the keyval it is called for (every attribute of it does so in turn). */
static int del_free_fn(MPI_Comm c, int k, void *v, void *extra)
{
    (void)c, (void)v, (void)extra;
    return MPI_Comm_free_keyval(&k);
}
static int getkey = MPI_KEYVAL_INVALID, got_in_delete;
/* Reads the attribute that is being deleted. */
static int del_get_fn(MPI_Comm c, int k, void *v, void *extra)
{
    void *p;
    int flag = 0;
    (void)k, (void)extra;
    if (MPI_Comm_get_attr(c, getkey, &p, &flag) == MPI_SUCCESS && flag && p == v)
        got_in_delete = 1;
    return MPI_SUCCESS;
}

static int errh_calls;
static void errh_fn(MPI_Comm *c, int *code, ...)
{
    (void)c, (void)code;
    errh_calls++;
}

int main(int argc, char **argv)
{
    MPI_Datatype vec, t2;
    MPI_Request r, rr;
    MPI_Status st;
    int i, k;

    tu_init(&argc, &argv);
    partner = tu_partner();
    self_only = partner == tu_rank;

    /* 1. Datatypes. */
    {
        enum { N = 1000 };
        int *sb = tu_malloc(sizeof(int) * 2 * N), *rb = tu_malloc(sizeof(int) * 2 * N);
        MPI_Request ps, pr;
        CHECK_MPI(MPI_Type_vector(N, 1, 2, MPI_INT, &vec));
        CHECK_MPI(MPI_Type_commit(&vec));
        CHECK_MPI(MPI_Send_init(sb, 1, vec, partner, 1, MPI_COMM_WORLD, &ps));
        CHECK_MPI(MPI_Recv_init(rb, 1, vec, partner, 1, MPI_COMM_WORLD, &pr));
        CHECK_MPI(MPI_Type_free(&vec));
        CHECK(vec == MPI_DATATYPE_NULL);
        for (k = 0; k < 3; k++) {
            for (i = 0; i < 2 * N; i++) {
                sb[i] = i % 2 ? -1 : tu_rank * 100000 + k * 10000 + i;
                rb[i] = -7;
            }
            CHECK_MPI(MPI_Start(&pr));
            CHECK_MPI(MPI_Start(&ps));
            CHECK_MPI(MPI_Wait(&ps, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Wait(&pr, &st));
            for (i = 0; i < 2 * N; i++)
                CHECK_EQ(rb[i], i % 2 ? -7 : partner * 100000 + k * 10000 + i);
        }
        CHECK_MPI(MPI_Request_free(&ps));
        CHECK_MPI(MPI_Request_free(&pr));

        /* In flight: 64 KiB of a strided type (beyond the eager path), freed right after the
         * calls. */
        {
            enum { M = 16384 };
            int *s2 = tu_malloc(sizeof(int) * 2 * M), *r2 = tu_malloc(sizeof(int) * 2 * M);
            for (i = 0; i < 2 * M; i++) {
                s2[i] = tu_rank * 7 + i;
                r2[i] = -1;
            }
            CHECK_MPI(MPI_Type_vector(M, 1, 2, MPI_INT, &vec));
            CHECK_MPI(MPI_Type_commit(&vec));
            CHECK_MPI(MPI_Irecv(r2, 1, vec, partner, 2, MPI_COMM_WORLD, &rr));
            CHECK_MPI(MPI_Isend(s2, 1, vec, partner, 2, MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Type_free(&vec));
            CHECK_MPI(MPI_Type_contiguous(3, MPI_DOUBLE, &t2)); /* may reuse a freed slot */
            CHECK_MPI(MPI_Type_commit(&t2));
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Wait(&rr, MPI_STATUS_IGNORE));
            for (i = 0; i < 2 * M; i++)
                CHECK_EQ(r2[i], i % 2 ? -1 : partner * 7 + i);
            CHECK_MPI(MPI_Type_free(&t2));
            free(s2);
            free(r2);
        }
        free(sb);
        free(rb);
    }

    /* A persistent buffered send still allocated (inactive) does not hold the attached
     * buffer: MPI_Buffer_detach returns once its message went. */
    {
        int x = tu_rank, y = -1, bsize, dsize;
        char *bbuf;
        void *dbuf;
        MPI_Request ps;
        CHECK_MPI(MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, &bsize));
        bsize += MPI_BSEND_OVERHEAD;
        bbuf = tu_malloc(bsize);
        CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));
        CHECK_MPI(MPI_Bsend_init(&x, 1, MPI_INT, partner, 3, MPI_COMM_WORLD, &ps));
        CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, partner, 3, MPI_COMM_WORLD, &rr));
        CHECK_MPI(MPI_Start(&ps));
        CHECK_MPI(MPI_Wait(&ps, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Wait(&rr, MPI_STATUS_IGNORE));
        CHECK_EQ(y, partner);
        CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
        CHECK_EQ(dsize, bsize);
        CHECK_MPI(MPI_Request_free(&ps));
        free(bbuf);
    }

    /* 2. User reductions with the operation and the type freed during the call. */
    {
        MPI_Op op;
        MPI_Datatype pair, other;
        int in[8], out[8];
        CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
        CHECK_MPI(MPI_Type_commit(&pair));
        expected_size = 2 * (int)sizeof(int);
        CHECK_MPI(MPI_Op_create(sum_fn, 1, &op));
        for (i = 0; i < 8; i++) {
            in[i] = tu_rank + i;
            out[i] = -1;
        }
        CHECK_MPI(MPI_Iallreduce(in, out, 4, pair, op, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Op_free(&op));
        CHECK_MPI(MPI_Type_free(&pair));
        CHECK_MPI(MPI_Type_contiguous(5, MPI_CHAR, &other)); /* must not take pair's handle */
        CHECK_MPI(MPI_Type_commit(&other));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (i = 0; i < 8; i++)
            CHECK_EQ(out[i], tu_size * i + tu_size * (tu_size - 1) / 2);
        CHECK(op_size_ok);
        CHECK_MPI(MPI_Type_free(&other));

#if MPI_VERSION >= 4
        if (!tu_quirk("no_persistent_coll")) {
            CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
            CHECK_MPI(MPI_Type_commit(&pair));
            CHECK_MPI(MPI_Op_create(sum_fn, 1, &op));
            CHECK_MPI(MPI_Allreduce_init(in, out, 4, pair, op, MPI_COMM_WORLD, MPI_INFO_NULL,
                                         &r));
            CHECK_MPI(MPI_Op_free(&op));
            CHECK_MPI(MPI_Type_free(&pair));
            CHECK_MPI(MPI_Type_contiguous(7, MPI_CHAR, &other));
            CHECK_MPI(MPI_Type_commit(&other));
            for (k = 0; k < 2; k++) {
                for (i = 0; i < 8; i++)
                    out[i] = -1;
                CHECK_MPI(MPI_Start(&r));
                CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
                for (i = 0; i < 8; i++)
                    CHECK_EQ(out[i], tu_size * i + tu_size * (tu_size - 1) / 2);
            }
            CHECK(op_size_ok);
            CHECK_MPI(MPI_Request_free(&r));
            CHECK_MPI(MPI_Type_free(&other));
        }
#endif
    }

    /* 3. Communicators. A receive stays pending on A when A is freed; B, created next, gets
     * another context: B's message does not reach A's receive. */
    {
        MPI_Comm a, b;
        int x = -1, y = -1, v = 2, flag;
        if (tu_quirk("freed_comm_context")) {
            CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &b));
            goto disconnect;
        }
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &a));
        CHECK_MPI(MPI_Irecv(&x, 1, MPI_INT, partner, 7, a, &rr));
        CHECK_MPI(MPI_Comm_free(&a));
        CHECK(a == MPI_COMM_NULL);
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &b));
        CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, partner, 7, b, &r));
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, partner, 7, b));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_EQ(y, 2);
        CHECK_MPI(MPI_Test(&rr, &flag, MPI_STATUS_IGNORE));
        CHECK_EQ(flag, 0);
        CHECK_MPI(MPI_Cancel(&rr));
        CHECK_MPI(MPI_Wait(&rr, &st));
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK_EQ(flag, 1);
        CHECK_EQ(x, -1);
    disconnect:
        /* Disconnect completes a pending send first (the partner receives it after its own
         * disconnect started only if it is alone: then it receives before). */
        {
            enum { L = 1 << 18 };
            char *s3 = tu_malloc(L), *r3 = tu_malloc(L);
            tu_fill(s3, L, TU_SEED(tu_rank, partner, 3));
            CHECK_MPI(MPI_Irecv(r3, L, MPI_CHAR, partner, 8, b, &rr));
            CHECK_MPI(MPI_Isend(s3, L, MPI_CHAR, partner, 8, b, &r));
            CHECK_MPI(MPI_Wait(&rr, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Comm_disconnect(&b));
            CHECK(b == MPI_COMM_NULL);
            /* The send is complete now (the request is still to be waited for). */
            CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
            if (tu_quirk("disconnect_pending"))
                CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
            else
                CHECK_EQ(flag, 1);
            CHECK_BUF(r3, L, TU_SEED(partner, tu_rank, 3));
            free(s3);
            free(r3);
        }
    }

    /* 4. Keyvals. */
    {
        MPI_Comm c, cd;
        MPI_Datatype t, td;
        int kv, key[8], a = 1;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        CHECK_MPI(MPI_Comm_create_keyval(copy_fn, del_fn, &kv, NULL));
        CHECK_MPI(MPI_Comm_set_attr(c, kv, &a));
        CHECK_MPI(MPI_Comm_free_keyval(&kv));
        CHECK(kv == MPI_KEYVAL_INVALID);
        for (i = 0; i < 8; i++) /* these may take the freed keyval's number if it were gone */
            CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN,
                                             &key[i], NULL));
        CHECK_MPI(MPI_Comm_dup(c, &cd));
        CHECK_EQ(a, 2);
        CHECK_MPI(MPI_Comm_free(&cd));
        CHECK_EQ(a, 1);
        CHECK_MPI(MPI_Comm_free(&c));
        CHECK_EQ(a, 0);
        for (i = 0; i < 8; i++)
            CHECK_MPI(MPI_Comm_free_keyval(&key[i]));

        a = 1;
        CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &t));
        CHECK_MPI(MPI_Type_create_keyval(tcopy_fn, tdel_fn, &kv, NULL));
        CHECK_MPI(MPI_Type_set_attr(t, kv, &a));
        CHECK_MPI(MPI_Type_free_keyval(&kv));
        CHECK_MPI(MPI_Type_dup(t, &td));
        CHECK_EQ(a, 2);
        CHECK_MPI(MPI_Type_free(&td));
        CHECK_EQ(a, 1);
        CHECK_MPI(MPI_Type_free(&t));
        CHECK_EQ(a, 0);

        /* A delete callback that frees its keyval: once per attribute, then the user's own
         * frees, all accepted while attributes still use it. */
        if (!tu_quirk("keyval_free_again")) {
            int kk, copy;
            CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
            CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &cd));
            CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_free_fn, &kk, NULL));
            copy = kk;
            CHECK_MPI(MPI_Comm_set_attr(c, kk, NULL));
            CHECK_MPI(MPI_Comm_set_attr(cd, kk, NULL));
            CHECK_MPI(MPI_Comm_free(&cd));
            CHECK_MPI(MPI_Comm_free_keyval(&kk));
            CHECK_MPI(MPI_Comm_free_keyval(&copy));
            CHECK_MPI(MPI_Comm_free(&c));
        }
        /* A delete callback reading the attribute being deleted. */
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_get_fn, &getkey, NULL));
        CHECK_MPI(MPI_Comm_set_attr(c, getkey, &attr_counter));
        CHECK_MPI(MPI_Comm_free(&c));
        CHECK_EQ(got_in_delete, 1);
        CHECK_MPI(MPI_Comm_free_keyval(&getkey));
    }

    /* 5. Group, error handler, info. */
    {
        MPI_Group g;
        MPI_Comm c;
        MPI_Errhandler eh;
        MPI_Info info, got;
        char val[64];
        int flag, sz, bad_rank;
        CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &g));
        CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, g, &c));
        CHECK_MPI(MPI_Group_free(&g));
        CHECK(g == MPI_GROUP_NULL);
        CHECK_MPI(MPI_Comm_size(c, &sz));
        CHECK_EQ(sz, tu_size);
        CHECK_MPI(MPI_Comm_create_errhandler(errh_fn, &eh));
        CHECK_MPI(MPI_Comm_set_errhandler(c, eh));
        CHECK_MPI(MPI_Errhandler_free(&eh));
        CHECK(eh == MPI_ERRHANDLER_NULL);
        bad_rank = tu_size; /* out of range: the freed handler is still called */
        (void)MPI_Send(&sz, 1, MPI_INT, bad_rank, 0, c);
        CHECK_EQ(errh_calls, 1);
        CHECK_MPI(MPI_Info_create(&info));
        CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
        CHECK_MPI(MPI_Comm_set_info(c, info));
        CHECK_MPI(MPI_Info_free(&info));
        CHECK_MPI(MPI_Comm_get_info(c, &got));
        CHECK_MPI(MPI_Info_get(got, "mpi_assert_no_any_tag", 63, val, &flag));
        if (!tu_quirk("info_assert_dropped")) {
            CHECK_EQ(flag, 1);
            CHECK(strcmp(val, "true") == 0);
        }
        CHECK_MPI(MPI_Info_free(&got));
        CHECK_MPI(MPI_Comm_free(&c));
    }
    (void)self_only;
    return tu_finish();
}
