/*
 * MPI_T events (MPI-4.0 15.3.8), as a tool watching Protean reconfigure would use them:
 *  - the kinds and their source: names, elements (datatypes, displacements), categories, the
 *    clock (nanoseconds, ordered, MPI_Wtime's);
 *  - callbacks at MPI_T_CB_REQUIRE_MPI_RESTRICTED record every occurrence of every kind while
 *    phases of traffic move the dedicated channels between peers (the traffic of
 *    tests/p2p/phases): each MPI_Pcontrol raises protean_phase with the phase's number; the
 *    promotions and demotions raised equal what the MPI_T counters protean_chan_promotions and
 *    protean_chan_demotions counted meanwhile; timestamps never go back; MPI_T_event_copy
 *    lays out what MPI_T_event_read reads;
 *  - writing the eager limit at run time raises protean_protocol_limits for every other rank
 *    with the new boundary (under the static and adaptive policies);
 *  - a registration whose only callback is at MPI_T_CB_REQUIRE_NONE gets none called inside
 *    MPI: its occurrences are dropped and its dropped handler hears exactly how many at
 *    MPI_T_event_handle_free, which calls the free callback; one with a THREAD_SAFE callback
 *    is called (in the MPI_RESTRICTED context);
 *  - info of handles and callbacks, errors for bad indices, names, handles and safety levels;
 *    no callback after the last MPI_T_finalize.
 * With PROTEAN_TEST_EXPECT_MOVES=1 (churn forced by the manifest) the channels must have
 * moved: grants, take-backs, promotions and demotions all raised. Any size >= 1. Protean only.
 */
#include "util.h"
#include "pvar.h"

#define NPHASE 8
#define NMSG 16
#define NSIZE 4
#define MAXREC 100000
static const int sizes[NSIZE] = {8, 1000, 16384, 100000};

enum { GRANT, TAKE_BACK, PROMOTED, DEMOTED, LIMITS, PHASE, NKIND };
static const char *kind_names[NKIND] = {"protean_chan_grant",    "protean_chan_take_back",
                                        "protean_chan_promoted", "protean_chan_demoted",
                                        "protean_protocol_limits", "protean_phase"};
static const int kind_elements[NKIND] = {2, 2, 1, 1, 4, 1};

struct rec {
    int kind;
    long long ts;
    long long v[4];
};
static struct rec *recs;
static int nrec, overflow, bad_safety, copy_mismatch;
static long long seen[NKIND], thread_safe_calls;
static MPI_T_event_registration regs[NKIND];
static int index_of[NKIND]; /* MPI_T's index of each kind */

static int kind_of(MPI_T_event_registration r)
{
    for (int k = 0; k < NKIND; k++)
        if (regs[k] == r)
            return k;
    return -1;
}

static void on_event(MPI_T_event_instance ev, MPI_T_event_registration reg, MPI_T_cb_safety s,
                     void *user)
{
    int k = kind_of(reg);
    if (s != MPI_T_CB_REQUIRE_MPI_RESTRICTED || k < 0 || user != &regs[k])
        bad_safety++;
    if (k < 0)
        return;
    seen[k]++;
    if (nrec == MAXREC) {
        overflow = 1;
        return;
    }
    struct rec *r = &recs[nrec++];
    r->kind = k;
    MPI_Count ts = -1;
    int src = -1;
    MPI_T_event_get_timestamp(ev, &ts);
    MPI_T_event_get_source(ev, &src);
    r->ts = src == 0 ? (long long)ts : -1;
    /* Element by element, then all at once at the displacements of get_info. */
    unsigned char whole[64];
    memset(whole, 0xee, sizeof whole);
    MPI_T_event_copy(ev, whole);
    for (int j = 0; j < kind_elements[k]; j++) {
        if (k == LIMITS && j > 0) {
            MPI_Count c = 0;
            MPI_T_event_read(ev, j, &c);
            r->v[j] = c;
            if (memcmp(whole + 8 * j, &c, sizeof c) != 0)
                copy_mismatch++;
        } else {
            int x = 0;
            MPI_T_event_read(ev, j, &x);
            r->v[j] = x;
            if (memcmp(whole + 4 * j, &x, sizeof x) != 0)
                copy_mismatch++;
        }
    }
}

static void on_thread_safe(MPI_T_event_instance ev, MPI_T_event_registration reg,
                           MPI_T_cb_safety s, void *user)
{
    (void)ev;
    (void)reg;
    (void)user;
    if (s == MPI_T_CB_REQUIRE_MPI_RESTRICTED)
        thread_safe_calls++;
}

static void never(MPI_T_event_instance ev, MPI_T_event_registration reg, MPI_T_cb_safety s,
                  void *user)
{
    (void)ev;
    (void)reg;
    (void)s;
    (void)user;
    TU_FAIL("a callback registered at MPI_T_CB_REQUIRE_NONE was called inside MPI");
}

static long long dropped_reported, dropped_calls;
static void on_dropped(MPI_Count count, MPI_T_event_registration reg, int source,
                       MPI_T_cb_safety s, void *user)
{
    (void)reg;
    (void)s;
    CHECK_EQ(source, 0);
    CHECK(user == &dropped_reported);
    dropped_reported += count;
    dropped_calls++;
}

static int freed;
static void on_free(MPI_T_event_registration reg, MPI_T_cb_safety s, void *user)
{
    (void)reg;
    (void)s;
    CHECK(user == &freed);
    freed++;
}

/* The traffic of tests/p2p/phases: in phase p every rank exchanges NMSG messages with the two
 * ranks at distance d(p), so the busy peers change every phase. */
static void traffic(int p, unsigned char **sbuf, unsigned char **rbuf)
{
    int half = tu_size / 2 > 1 ? tu_size / 2 : 1;
    int d = 1 + p % half;
    int to[2] = {(tu_rank + d) % tu_size, (tu_rank - d + tu_size) % tu_size};
    MPI_Request rr[2 * NMSG], sr[2 * NMSG];
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < NMSG; i++)
            CHECK_MPI(MPI_Irecv(rbuf[s * NMSG + i], sizes[i % NSIZE], MPI_BYTE, to[1 - s], i,
                                MPI_COMM_WORLD, &rr[s * NMSG + i]));
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < NMSG; i++) {
            tu_fill(sbuf[s * NMSG + i], sizes[i % NSIZE], TU_SEED(tu_rank, to[s], p * NMSG + i));
            CHECK_MPI(MPI_Isend(sbuf[s * NMSG + i], sizes[i % NSIZE], MPI_BYTE, to[s], i,
                                MPI_COMM_WORLD, &sr[s * NMSG + i]));
        }
    CHECK_MPI(MPI_Waitall(2 * NMSG, rr, MPI_STATUSES_IGNORE));
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < NMSG; i++)
            CHECK_BUF(rbuf[s * NMSG + i], sizes[i % NSIZE], TU_SEED(to[1 - s], tu_rank, p * NMSG + i));
    CHECK_MPI(MPI_Waitall(2 * NMSG, sr, MPI_STATUSES_IGNORE));
}

static void check_kinds(void)
{
    int n = 0;
    CHECK_MPI(MPI_T_event_get_num(&n));
    CHECK_INT(n, >=, NKIND);
    int in_categories = 0, ncat = 0;
    CHECK_MPI(MPI_T_category_get_num(&ncat));
    for (int c = 0; c < ncat; c++) {
        int ne = -1;
        CHECK_MPI(MPI_T_category_get_num_events(c, &ne));
        int idx[64];
        CHECK_MPI(MPI_T_category_get_events(c, 64, idx));
        for (int j = 0; j < ne; j++)
            CHECK(idx[j] >= 0 && idx[j] < n);
        in_categories += ne;
    }
    CHECK_EQ(in_categories, n);
    for (int k = 0; k < NKIND; k++) {
        int i = -1;
        CHECK_MPI(MPI_T_event_get_index(kind_names[k], &i));
        index_of[k] = i;
        char name[128], desc[1024];
        int nl = sizeof name, dl = sizeof desc, verb, ne = 8, bind = -1;
        MPI_Datatype dt[8];
        MPI_Aint disp[8];
        MPI_T_enum en;
        MPI_Info info = MPI_INFO_ENV;
        CHECK_MPI(MPI_T_event_get_info(i, name, &nl, &verb, dt, disp, &ne, &en, &info, desc, &dl,
                                       &bind));
        CHECK_MSG(strcmp(name, kind_names[k]) == 0, "event %d is %s", i, name);
        CHECK_EQ(nl, (int)strlen(name) + 1);
        CHECK_EQ(dl, (int)strlen(desc) + 1);
        CHECK_EQ(ne, kind_elements[k]);
        CHECK_EQ(bind, MPI_T_BIND_NO_OBJECT);
        CHECK(info == MPI_INFO_NULL && en == MPI_T_ENUM_NULL);
        for (int j = 0; j < ne; j++) {
            int count = k == LIMITS && j > 0;
            CHECK(dt[j] == (count ? MPI_COUNT : MPI_INT));
            CHECK_EQ(disp[j], count ? 8 * j : 4 * j);
        }
        /* Only the length asked for. */
        nl = 0;
        ne = 0;
        CHECK_MPI(MPI_T_event_get_info(i, NULL, &nl, NULL, NULL, NULL, &ne, NULL, NULL, NULL,
                                       NULL, NULL));
        CHECK_EQ(nl, (int)strlen(kind_names[k]) + 1);
        CHECK_EQ(ne, kind_elements[k]);
    }
    int i;
    CHECK_EQ(MPI_T_event_get_index("no_such_event", &i), MPI_T_ERR_INVALID_NAME);
    CHECK_EQ(MPI_T_event_get_info(n, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                  NULL),
             MPI_T_ERR_INVALID_INDEX);
    CHECK_EQ(MPI_T_event_get_info(-1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                  NULL),
             MPI_T_ERR_INVALID_INDEX);
    /* The source. */
    int ns = 0;
    CHECK_MPI(MPI_T_source_get_num(&ns));
    CHECK_EQ(ns, 1);
    char sname[64];
    int snl = sizeof sname, sdl = 0;
    MPI_T_source_order order = MPI_T_SOURCE_UNORDERED;
    MPI_Count tps = 0, maxt = 0, t0 = 0, t1 = 0;
    MPI_Info sinfo;
    CHECK_MPI(MPI_T_source_get_info(0, sname, &snl, NULL, &sdl, &order, &tps, &maxt, &sinfo));
    CHECK(order == MPI_T_SOURCE_ORDERED && sinfo == MPI_INFO_NULL);
    CHECK_EQ(tps, 1000000000);
    CHECK_INT(maxt, >, 1000000000);
    CHECK_INT(sdl, >, 1);
    CHECK_EQ(MPI_T_source_get_info(1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
             MPI_T_ERR_INVALID_INDEX);
    CHECK_MPI(MPI_T_source_get_timestamp(0, &t0));
    double w = MPI_Wtime();
    CHECK_MPI(MPI_T_source_get_timestamp(0, &t1));
    CHECK_INT(t1, >=, t0);
    CHECK_MSG(w * 1e9 >= (double)t0 - 1e6 && w * 1e9 <= (double)t1 + 1e6,
              "MPI_Wtime %.9f outside the source's timestamps %lld..%lld", w, (long long)t0,
              (long long)t1);
    CHECK_EQ(MPI_T_source_get_timestamp(1, &t0), MPI_T_ERR_INVALID_INDEX);
}

static void check_handles(void)
{
    MPI_T_event_registration r;
    CHECK_EQ(MPI_T_event_handle_alloc(-1, NULL, MPI_INFO_NULL, &r), MPI_T_ERR_INVALID_INDEX);
    CHECK_MPI(MPI_T_event_handle_alloc(index_of[PHASE], NULL, MPI_INFO_NULL, &r));
    CHECK_EQ(MPI_T_event_register_callback(r, 7, MPI_INFO_NULL, NULL, on_event),
             MPI_T_ERR_INVALID);
    /* Info of the handle and of a callback come back as set. */
    MPI_Info in, got;
    char v[64];
    int flag = 0;
    CHECK_MPI(MPI_Info_create(&in));
    CHECK_MPI(MPI_Info_set(in, "tool", "watcher"));
    CHECK_MPI(MPI_T_event_handle_set_info(r, in));
    CHECK_MPI(MPI_T_event_handle_get_info(r, &got));
    CHECK_MPI(MPI_Info_get(got, "tool", sizeof v - 1, v, &flag));
    CHECK(flag && strcmp(v, "watcher") == 0);
    CHECK_MPI(MPI_Info_free(&got));
    CHECK_MPI(MPI_T_event_register_callback(r, MPI_T_CB_REQUIRE_THREAD_SAFE, in, NULL, never));
    CHECK_MPI(MPI_T_event_callback_get_info(r, MPI_T_CB_REQUIRE_THREAD_SAFE, &got));
    CHECK_MPI(MPI_Info_get(got, "tool", sizeof v - 1, v, &flag));
    CHECK(flag);
    CHECK_MPI(MPI_Info_free(&got));
    CHECK_MPI(MPI_T_event_callback_get_info(r, MPI_T_CB_REQUIRE_NONE, &got));
    int nkeys = -1;
    CHECK_MPI(MPI_Info_get_nkeys(got, &nkeys));
    CHECK_EQ(nkeys, 0);
    CHECK_MPI(MPI_Info_free(&got));
    CHECK_MPI(MPI_T_event_callback_set_info(r, MPI_T_CB_REQUIRE_NONE, in));
    CHECK_MPI(MPI_Info_free(&in));
    /* A NULL callback removes the level's. */
    CHECK_MPI(MPI_T_event_register_callback(r, MPI_T_CB_REQUIRE_THREAD_SAFE, MPI_INFO_NULL, NULL,
                                            NULL));
    CHECK_MPI(MPI_T_event_handle_free(r, NULL, NULL));
    CHECK_EQ(MPI_T_event_handle_free(r, NULL, NULL), MPI_T_ERR_INVALID_HANDLE);
    CHECK_EQ(MPI_T_event_set_dropped_handler(r, on_dropped), MPI_T_ERR_INVALID_HANDLE);
    CHECK_EQ(MPI_T_event_read(NULL, 0, v), MPI_T_ERR_INVALID_HANDLE);
}

/* The eager limit control variable's index. */
static int eager_limit_cvar(void)
{
    int n = 0;
    CHECK_MPI(MPI_T_cvar_get_num(&n));
    for (int i = 0; i < n; i++) {
        char name[128];
        int nl = sizeof name, verb, bind, scope;
        MPI_Datatype dt;
        MPI_T_enum en;
        CHECK_MPI(MPI_T_cvar_get_info(i, name, &nl, &verb, &dt, &en, NULL, NULL, &bind, &scope));
        if (strcmp(name, "eager_limit") == 0)
            return i;
    }
    TU_FAIL("no control variable eager_limit");
}

static void write_cvar(int idx, int value)
{
    MPI_T_cvar_handle h;
    int count;
    CHECK_MPI(MPI_T_cvar_handle_alloc(idx, NULL, &h, &count));
    CHECK_MPI(MPI_T_cvar_write(h, &value));
    CHECK_MPI(MPI_T_cvar_handle_free(&h));
}

static int read_cvar(int idx)
{
    MPI_T_cvar_handle h;
    int count, value = 0;
    CHECK_MPI(MPI_T_cvar_handle_alloc(idx, NULL, &h, &count));
    CHECK_MPI(MPI_T_cvar_read(h, &value));
    CHECK_MPI(MPI_T_cvar_handle_free(&h));
    return value;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int provided;
    CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    recs = tu_malloc(sizeof *recs * MAXREC);
    unsigned char *sbuf[2 * NMSG], *rbuf[2 * NMSG];
    for (int i = 0; i < 2 * NMSG; i++) {
        sbuf[i] = tu_malloc(sizes[i % NMSG % NSIZE]);
        rbuf[i] = tu_malloc(sizes[i % NMSG % NSIZE]);
    }
    check_kinds();
    check_handles();

    /* Watch everything. */
    for (int k = 0; k < NKIND; k++) {
        CHECK_MPI(MPI_T_event_handle_alloc(index_of[k], NULL, MPI_INFO_NULL, &regs[k]));
        CHECK_MPI(MPI_T_event_register_callback(regs[k], MPI_T_CB_REQUIRE_MPI_RESTRICTED,
                                                MPI_INFO_NULL, &regs[k], on_event));
        /* A stricter level's callback too: the least strict that fits is called. */
        CHECK_MPI(MPI_T_event_register_callback(regs[k], MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE,
                                                MPI_INFO_NULL, NULL, never));
    }
    MPI_T_event_registration none_only, thread_safe;
    CHECK_MPI(MPI_T_event_handle_alloc(index_of[PHASE], NULL, MPI_INFO_NULL, &none_only));
    CHECK_MPI(MPI_T_event_register_callback(none_only, MPI_T_CB_REQUIRE_NONE, MPI_INFO_NULL,
                                            NULL, never));
    CHECK_MPI(MPI_T_event_set_dropped_handler(none_only, on_dropped));
    CHECK_MPI(MPI_T_event_handle_alloc(index_of[PHASE], NULL, MPI_INFO_NULL, &thread_safe));
    CHECK_MPI(MPI_T_event_register_callback(thread_safe, MPI_T_CB_REQUIRE_THREAD_SAFE,
                                            MPI_INFO_NULL, NULL, on_thread_safe));

    long long prom0 = tu_pvar("protean_chan_promotions");
    long long dem0 = tu_pvar("protean_chan_demotions");
    MPI_Count start;
    CHECK_MPI(MPI_T_source_get_timestamp(0, &start));
    for (int p = 0; p < NPHASE; p++) {
        CHECK_MPI(MPI_Pcontrol(1));
        traffic(p, sbuf, rbuf);
    }
    /* The eager limit written at run time: new boundaries for every peer. */
    int lim = eager_limit_cvar();
    int old = read_cvar(lim);
    int before_write = nrec;
    write_cvar(lim, 1000);
    traffic(0, sbuf, rbuf);
    int after_write = nrec;
    write_cvar(lim, old);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    long long prom1 = tu_pvar("protean_chan_promotions");
    long long dem1 = tu_pvar("protean_chan_demotions");
    MPI_Count end;
    CHECK_MPI(MPI_T_source_get_timestamp(0, &end));

    CHECK_MSG(!overflow, "more than %d events", MAXREC);
    CHECK_EQ(bad_safety, 0);
    CHECK_EQ(copy_mismatch, 0);
    /* Phases: one occurrence per MPI_Pcontrol, numbered on. */
    CHECK_EQ(seen[PHASE], NPHASE);
    int ph = 0;
    long long first_phase = -1;
    for (int j = 0; j < nrec; j++)
        if (recs[j].kind == PHASE) {
            if (first_phase < 0)
                first_phase = recs[j].v[0];
            CHECK_EQ(recs[j].v[0], first_phase + ph);
            ph++;
        }
    CHECK_INT(first_phase, >=, 1);
    CHECK_EQ(thread_safe_calls, NPHASE);
    /* Promotions and demotions: exactly what the counters counted. */
    CHECK_EQ(seen[PROMOTED], prom1 - prom0);
    CHECK_EQ(seen[DEMOTED], dem1 - dem0);
    /* Timestamps: from this source, in order, within the run. */
    long long last = start;
    for (int j = 0; j < nrec; j++) {
        CHECK_MSG(recs[j].ts >= last, "event %d (%s) at %lld, before %lld", j,
                  kind_names[recs[j].kind], recs[j].ts, last);
        last = recs[j].ts;
        if (recs[j].kind != PHASE && recs[j].kind != LIMITS)
            CHECK(recs[j].v[0] >= 0 && recs[j].v[0] < tu_size && recs[j].v[0] != tu_rank);
        if (recs[j].kind == GRANT)
            CHECK(recs[j].v[1] == 0 || recs[j].v[1] == 1);
        if (recs[j].kind == TAKE_BACK)
            CHECK(recs[j].v[1] >= 1 && recs[j].v[1] <= 3);
    }
    CHECK_INT(last, <=, end);
    /* The eager limit: every other rank's boundary moved to 1000 bytes (where the policy
     * decides: a protocol forced for every message has no boundary to move). */
    const char *proto = getenv("PROTEAN_PROTOCOL");
    int forced = proto && strcmp(proto, "static") != 0 && strcmp(proto, "adaptive") != 0;
    for (int peer = 0; peer < tu_size && !forced; peer++) {
        if (peer == tu_rank)
            continue;
        int found = 0;
        for (int j = before_write; j < after_write; j++)
            if (recs[j].kind == LIMITS && recs[j].v[0] == peer && recs[j].v[1] == 1000)
                found = 1;
        CHECK_MSG(found, "no protean_protocol_limits event for rank %d with eager_max 1000", peer);
    }
    const char *expect = getenv("PROTEAN_TEST_EXPECT_MOVES");
    if (expect && atoi(expect) > 0) {
        long long sum[NKIND];
        CHECK_MPI(MPI_Reduce(seen, sum, NKIND, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
        if (tu_rank == 0) {
            TU_LOG("grants %lld take-backs %lld promotions %lld demotions %lld limits %lld",
                   sum[GRANT], sum[TAKE_BACK], sum[PROMOTED], sum[DEMOTED], sum[LIMITS]);
            for (int k = GRANT; k <= DEMOTED; k++)
                CHECK_MSG(sum[k] > 0, "no %s event while channels had to move", kind_names[k]);
        }
    }

    /* The registration with only a NONE-level callback: every phase dropped, reported once
     * at free, then the free callback. */
    CHECK_MPI(MPI_T_event_handle_free(none_only, &dropped_reported, NULL));
    CHECK_EQ(dropped_reported, NPHASE);
    CHECK_EQ(dropped_calls, 1);
    CHECK_MPI(MPI_T_event_handle_free(thread_safe, &freed, on_free));
    CHECK_EQ(freed, 1);
    for (int k = 0; k < NKIND; k++)
        CHECK_MPI(MPI_T_event_handle_free(regs[k], &freed, on_free));
    CHECK_EQ(freed, 1 + NKIND);
    /* Registrations end with the interface: nothing is called afterwards. */
    long long phases = seen[PHASE];
    CHECK_MPI(MPI_T_event_handle_alloc(index_of[PHASE], NULL, MPI_INFO_NULL, &regs[PHASE]));
    CHECK_MPI(MPI_T_event_register_callback(regs[PHASE], MPI_T_CB_REQUIRE_MPI_RESTRICTED,
                                            MPI_INFO_NULL, &regs[PHASE], on_event));
    CHECK_MPI(MPI_T_finalize());
    CHECK_MPI(MPI_Pcontrol(1));
    CHECK_EQ(seen[PHASE], phases);
    for (int i = 0; i < 2 * NMSG; i++) {
        free(sbuf[i]);
        free(rbuf[i]);
    }
    free(recs);
    return tu_finish();
}
