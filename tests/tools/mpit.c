/*
 * The MPI tool information interface, as a tool would use it to steer the protocol:
 *  - control variables: find the eager limit (a variable whose name contains "eager" and
 *    "limit", an integer bound to no object), read it, write it at run time;
 *  - performance variables: find the per-protocol message counters (names containing "eager"
 *    or "rndv", and "sent"), read them through a session, reset a handle;
 *  - the next messages change protocol after the write: 4 KiB messages go eagerly with the
 *    default limits and by rendezvous once the limit is set to 1 KiB;
 *  - enumerations, categories, error codes for bad indices and handles, init/finalize nesting.
 * Pairs (0,1), (2,3), ...; an unpaired rank talks to itself. Protean only (the variable names
 * are Protean's); run under the static protocol policy.
 */
#include "util.h"

#define SIZE 4096
#define COUNT 5

static int find_cvar(const char *a, const char *b, int *dtype_out)
{
    int n = 0, i;
    CHECK_MPI(MPI_T_cvar_get_num(&n));
    for (i = 0; i < n; i++) {
        char name[256], desc[1024];
        int nlen = sizeof name, dlen = sizeof desc, verb, bind, scope;
        MPI_Datatype dt;
        MPI_T_enum en;
        CHECK_MPI(MPI_T_cvar_get_info(i, name, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope));
        CHECK_INT(nlen, ==, (int)strlen(name) + 1);
        if (strstr(name, a) && strstr(name, b) && dt == MPI_INT && bind == MPI_T_BIND_NO_OBJECT) {
            *dtype_out = dt;
            CHECK_MSG(scope == MPI_T_SCOPE_LOCAL, "%s must be writable at run time", name);
            return i;
        }
    }
    TU_FAIL("no control variable with '%s' and '%s' in its name", a, b);
}

static int find_pvar(const char *a, const char *b)
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
        if (strstr(name, a) && strstr(name, b)) {
            CHECK_EQ(cls, MPI_T_PVAR_CLASS_COUNTER);
            CHECK(dt == MPI_UNSIGNED_LONG_LONG);
            return i;
        }
    }
    TU_FAIL("no performance variable with '%s' and '%s' in its name", a, b);
}

static void exchange(int partner, char *out, char *in)
{
    int i;
    for (i = 0; i < COUNT; i++) {
        MPI_Request r;
        tu_fill(out, SIZE, TU_SEED(tu_rank, i, 0));
        CHECK_MPI(MPI_Irecv(in, SIZE, MPI_CHAR, partner, i, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Send(out, SIZE, MPI_CHAR, partner, i, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_BUF(in, SIZE, TU_SEED(partner, i, 0));
    }
}

int main(int argc, char **argv)
{
    int provided, limit_idx, dt, eager_idx, rndv_idx, count, old_limit, new_limit = 1024, v;
    int partner, rc, n, cat, ncat;
    unsigned long long eager0, eager1, rndv0, rndv1, zero;
    MPI_T_cvar_handle ch;
    MPI_T_pvar_session sess;
    MPI_T_pvar_handle eh, rh;
    char *out, *in;

    /* The interface works before MPI_Init and nests. */
    CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    CHECK_MPI(MPI_T_finalize());
    limit_idx = find_cvar("eager", "limit", &dt);
    CHECK_MPI(MPI_T_cvar_handle_alloc(limit_idx, NULL, &ch, &count));
    CHECK_EQ(count, 1);
    CHECK_MPI(MPI_T_cvar_read(ch, &old_limit));

    tu_init(&argc, &argv);
    partner = tu_partner();
    out = tu_malloc(SIZE);
    in = tu_malloc(SIZE);

    eager_idx = find_pvar("eager", "sent");
    rndv_idx = find_pvar("rndv", "sent");
    CHECK(eager_idx != rndv_idx);
    CHECK_MPI(MPI_T_pvar_session_create(&sess));
    CHECK_MPI(MPI_T_pvar_handle_alloc(sess, eager_idx, NULL, &eh, &count));
    CHECK_EQ(count, 1);
    CHECK_MPI(MPI_T_pvar_handle_alloc(sess, rndv_idx, NULL, &rh, &count));
    /* Counters are continuous: they cannot be started, but all-handles start is fine. */
    CHECK_EQ(MPI_T_pvar_start(sess, eh), MPI_T_ERR_PVAR_NO_STARTSTOP);
    CHECK_MPI(MPI_T_pvar_start(sess, MPI_T_PVAR_ALL_HANDLES));
    CHECK_EQ(MPI_T_pvar_write(sess, eh, &zero), MPI_T_ERR_PVAR_NO_WRITE);

    /* Default limits: 4 KiB goes eagerly (a limit of -1 means "each transport's own"). */
    CHECK_MSG(old_limit < 0 || old_limit >= SIZE, "default eager limit %d", old_limit);
    CHECK_MPI(MPI_T_pvar_read(sess, eh, &eager0));
    CHECK_MPI(MPI_T_pvar_read(sess, rh, &rndv0));
    exchange(partner, out, in);
    CHECK_MPI(MPI_T_pvar_read(sess, eh, &eager1));
    CHECK_MPI(MPI_T_pvar_read(sess, rh, &rndv1));
    CHECK_INT(eager1 - eager0, >=, COUNT);
    CHECK_INT(rndv1 - rndv0, ==, 0);

    /* Lower the limit at run time: the next messages use rendezvous. */
    CHECK_MPI(MPI_T_cvar_write(ch, &new_limit));
    CHECK_MPI(MPI_T_cvar_read(ch, &v));
    CHECK_EQ(v, new_limit);
    /* Both sides must have switched before the exchange, or a fast peer's eager message
     * would count on our side; an exchange of one message synchronises. */
    CHECK_MPI(MPI_Sendrecv(&v, 1, MPI_INT, partner, 99, &n, 1, MPI_INT, partner, 99,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_T_pvar_readreset(sess, eh, &eager0));
    CHECK_MPI(MPI_T_pvar_read(sess, eh, &zero));
    CHECK_INT(zero, ==, 0);
    CHECK_MPI(MPI_T_pvar_reset(sess, rh));
    exchange(partner, out, in);
    CHECK_MPI(MPI_T_pvar_read(sess, eh, &eager1));
    CHECK_MPI(MPI_T_pvar_read(sess, rh, &rndv1));
    CHECK_INT(rndv1, >=, COUNT);
    CHECK_INT(eager1, <=, 1); /* at most the 4-byte synchronisation message */

    /* Back to the default: eager again. */
    CHECK_MPI(MPI_T_cvar_write(ch, &old_limit));
    CHECK_MPI(MPI_Sendrecv(&v, 1, MPI_INT, partner, 99, &n, 1, MPI_INT, partner, 99,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_T_pvar_reset(sess, MPI_T_PVAR_ALL_HANDLES));
    exchange(partner, out, in);
    CHECK_MPI(MPI_T_pvar_read(sess, eh, &eager1));
    CHECK_MPI(MPI_T_pvar_read(sess, rh, &rndv1));
    CHECK_INT(eager1, >=, COUNT);
    CHECK_INT(rndv1, ==, 0);

    /* The policy is an enumerated control variable. */
    {
        int pidx, pcount, nitems, plen = 64;
        char pname[64];
        MPI_Datatype pdt;
        MPI_T_enum en;
        CHECK_MPI(MPI_T_cvar_get_index("protocol", &pidx));
        CHECK_MPI(MPI_T_cvar_get_info(pidx, pname, &plen, &v, &pdt, &en, NULL, NULL, &n, &n));
        CHECK(pdt == MPI_INT);
        CHECK(en != MPI_T_ENUM_NULL);
        CHECK_MPI(MPI_T_enum_get_info(en, &nitems, NULL, NULL));
        CHECK_INT(nitems, >=, 4);
        plen = sizeof pname;
        CHECK_MPI(MPI_T_enum_get_item(en, 2, &v, pname, &plen));
        CHECK_EQ(v, 2);
        CHECK_EQ(MPI_T_enum_get_item(en, nitems, &v, pname, &plen), MPI_T_ERR_INVALID_INDEX);
        (void)pcount;
    }

    /* Categories cover the variables. */
    CHECK_MPI(MPI_T_category_get_num(&ncat));
    CHECK_INT(ncat, >=, 1);
    for (cat = 0; cat < ncat; cat++) {
        int nc, np, nsub;
        CHECK_MPI(MPI_T_category_get_info(cat, NULL, NULL, NULL, NULL, &nc, &np, &nsub));
        if (nc > 0) {
            int *idx = tu_malloc(sizeof(int) * nc);
            CHECK_MPI(MPI_T_category_get_cvars(cat, nc, idx));
            CHECK_INT(idx[0], >=, 0);
            free(idx);
        }
    }

    /* Errors are return codes. */
    CHECK_EQ(MPI_T_cvar_get_info(1 << 20, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
             MPI_T_ERR_INVALID_INDEX);
    CHECK_EQ(MPI_T_cvar_get_index("no_such_variable", &n), MPI_T_ERR_INVALID_NAME);
    rc = MPI_T_pvar_read(sess, (MPI_T_pvar_handle)0x7777, &zero);
    CHECK_EQ(rc, MPI_T_ERR_INVALID_HANDLE);

    CHECK_MPI(MPI_T_pvar_handle_free(sess, &eh));
    CHECK(eh == MPI_T_PVAR_HANDLE_NULL);
    CHECK_MPI(MPI_T_pvar_handle_free(sess, &rh));
    CHECK_MPI(MPI_T_pvar_session_free(&sess));
    CHECK_MPI(MPI_T_cvar_handle_free(&ch));
    CHECK_MPI(MPI_T_finalize());
    CHECK_EQ(MPI_T_cvar_get_num(&n), MPI_T_ERR_NOT_INITIALIZED);
    free(out);
    free(in);
    return tu_finish();
}
