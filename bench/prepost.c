/*
 * prepost: effective throughput between two ranks against the share of receives posted before
 * their messages arrive (the MPI/CTP experiment).
 *
 * One round, for a message size S and a preposted share P%:
 *   rank 1 posts P% of K receives (MPI_Irecv), then tells rank 0 it is ready;
 *   rank 0 sends K messages (MPI_Isend), then a "done" message, and waits for its sends;
 *   rank 1 receives "done" — by then every message has at least announced itself, so the
 *   receives it posts now (the other 100-P%) find unexpected messages — posts them, waits for
 *   all K, and acknowledges;
 *   rank 0's clock runs from the "ready" to the acknowledgement.
 * Effective throughput = K * S bytes over that time, MB/s (10^6 bytes/s); the printed value is
 * the median over a cell's rounds: at least -r of them, more when they are short, so that a cell
 * lasts about -T milliseconds (rank 0 times the warm-up rounds and tells rank 1 the count;
 * at most 1000 rounds). All messages carry one tag, so matching order decides which messages
 * find preposted receives: the first P% of them.
 *
 * With -P SETTINGS (Protean only), one launch measures several protocol settings: every round
 * of a cell runs each setting once, in a random order, switching with the MPI_T control
 * variable 'protocol' on rank 0; each setting's cell is the median of its rounds.
 *
 * A mixed workload (-x) changes behaviour mid-run: rounds alternate between phases of 0% and
 * 100% preposted receives (each phase -X rounds long, default 8) over sizes cycling through the
 * -s list; one number, the total bytes over the total time, MB/s. With -P the settings take
 * turns, one pass over every size's two phases at a time, in a random order each pass; one
 * number per setting.
 *
 * Output: header lines starting with '#', then "<size_bytes> <percent> <MB_per_s>" per cell
 * (with -P, "<size_bytes> <percent> <MB_per_s> <setting>"; or "mixed <MB_per_s> [<setting>]"). Where the
 * library has Protean's MPI_T counters of bytes sent per protocol, rank 0 also prints, before
 * each cell, the bytes its measured rounds sent by each protocol: "# protocols <size_bytes> <percent> [<setting>] eager=B rndv=B split=B" (the
 * 4-byte "done" messages included); other libraries print no such line. With -x the same
 * line comes for each size's two phases (percent 0 and 100), ending in the phase's own
 * throughput: " phase_MB_per_s=X".
 */
#include "common.h"

#define TAG_DATA 20
#define TAG_READY 21
#define TAG_DONE 22
#define TAG_ACK 23
#define TAG_COUNT 24
#define MAX_ROUNDS 1000

/* One round; returns rank 0's time in seconds (0 on rank 1). */
static double one_round(int rank, long size, int k, int npre, unsigned char *sbuf,
                        unsigned char *rbufs, MPI_Request *reqs)
{
    int token = 0;
    if (rank == 0) {
        MPI_Recv(&token, 1, MPI_INT, 1, TAG_READY, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double t0 = MPI_Wtime();
        for (int i = 0; i < k; i++)
            MPI_Isend(sbuf, (int)size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &reqs[i]);
        MPI_Send(&token, 1, MPI_INT, 1, TAG_DONE, MPI_COMM_WORLD);
        MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(&token, 1, MPI_INT, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return MPI_Wtime() - t0;
    }
    for (int i = 0; i < npre; i++)
        MPI_Irecv(rbufs + (size_t)i * size, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &reqs[i]);
    MPI_Send(&token, 1, MPI_INT, 0, TAG_READY, MPI_COMM_WORLD);
    MPI_Recv(&token, 1, MPI_INT, 0, TAG_DONE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = npre; i < k; i++)
        MPI_Irecv(rbufs + (size_t)i * size, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &reqs[i]);
    MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
    MPI_Send(&token, 1, MPI_INT, 0, TAG_ACK, MPI_COMM_WORLD);
    return 0.0;
}

/* Bytes sent per protocol, from Protean's MPI_T performance variables (none elsewhere). */
static const char *proto_pvars[3] = {"protean_eager_bytes_sent", "protean_rndv_bytes_sent",
                                     "protean_split_bytes_sent"};
static MPI_T_pvar_session proto_session;
static MPI_T_pvar_handle proto_handles[3];
static int proto_ok, proto_inited;

static void proto_open(void)
{
    int provided, n, found = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return;
    proto_inited = 1;
    if (MPI_T_pvar_get_num(&n) != MPI_SUCCESS || MPI_T_pvar_session_create(&proto_session) != MPI_SUCCESS)
        return;
    proto_inited = 2;
    for (int i = 0; i < n; i++) {
        char name[256], desc[256];
        int nl = sizeof name, dl = sizeof desc, verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_pvar_get_info(i, name, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind, &ro, &cont,
                                &atomic) != MPI_SUCCESS)
            continue;
        for (int j = 0; j < 3; j++) {
            int count, size;
            if (strcmp(name, proto_pvars[j]) || bind != MPI_T_BIND_NO_OBJECT ||
                MPI_Type_size(dt, &size) != MPI_SUCCESS || size != 8 ||
                MPI_T_pvar_handle_alloc(proto_session, i, NULL, &proto_handles[j], &count) != MPI_SUCCESS)
                continue;
            if (!cont)
                MPI_T_pvar_start(proto_session, proto_handles[j]);
            found++;
        }
    }
    proto_ok = found == 3;
}

static void proto_read(unsigned long long v[3])
{
    for (int j = 0; j < 3; j++)
        if (MPI_T_pvar_read(proto_session, proto_handles[j], &v[j]) != MPI_SUCCESS)
            v[j] = 0;
}

/* -P: Protean's protocol settings, alternated round by round through the MPI_T control
 * variable 'protocol' (rank 0 only: the sender's setting decides). */
#define MAX_SETTINGS 8
static const char *setting_names[MAX_SETTINGS];
static int setting_vals[MAX_SETTINGS], nsettings;
static MPI_T_cvar_handle setting_cvar;

static int settings_open(void)
{
    int idx, nitems, verb, bind, scope, count;
    MPI_Datatype dt;
    MPI_T_enum en;
    if (!proto_inited || MPI_T_cvar_get_index("protocol", &idx) != MPI_SUCCESS ||
        MPI_T_cvar_get_info(idx, NULL, NULL, &verb, &dt, &en, NULL, NULL, &bind, &scope) !=
            MPI_SUCCESS ||
        dt != MPI_INT || en == MPI_T_ENUM_NULL ||
        MPI_T_enum_get_info(en, &nitems, NULL, NULL) != MPI_SUCCESS)
        return 0;
    for (int j = 0; j < nsettings; j++) {
        int found = 0;
        for (int i = 0; i < nitems && !found; i++) {
            char name[64];
            int len = sizeof name, val;
            if (MPI_T_enum_get_item(en, i, &val, name, &len) == MPI_SUCCESS &&
                !strcmp(name, setting_names[j])) {
                setting_vals[j] = val;
                found = 1;
            }
        }
        if (!found) {
            fprintf(stderr, "prepost: -P: no protocol setting '%s'\n", setting_names[j]);
            return 0;
        }
    }
    return MPI_T_cvar_handle_alloc(idx, NULL, &setting_cvar, &count) == MPI_SUCCESS;
}

/* Use setting j for the next messages (rank 0 with -P; nothing otherwise). */
static void setting_use(int rank, int j)
{
    if (rank == 0 && setting_names[0] && MPI_T_cvar_write(setting_cvar, &setting_vals[j]) != MPI_SUCCESS)
        bench_die("cannot write the 'protocol' control variable");
}

/* order[0..n) = a random permutation of 0..n-1 (a small LCG: reproducible, no libc state). */
static void shuffle(int *order, int n, unsigned *seed)
{
    for (int j = 0; j < n; j++)
        order[j] = j;
    for (int j = n - 1; j > 0; j--) {
        *seed = *seed * 1103515245u + 12345u;
        int x = (int)((*seed >> 16) % (unsigned)(j + 1)), tmp = order[j];
        order[j] = order[x];
        order[x] = tmp;
    }
}

/* Messages per round: K, fewer for large sizes so a round moves at most 32 MiB. */
static int msgs_for(long size, int k)
{
    long cap = size > 0 ? (32L << 20) / size : k;
    if (cap < 4)
        cap = 4;
    return (int)(k < cap ? k : cap);
}

int main(int argc, char **argv)
{
    int rank, nranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    /* Own flags first: -p percents, -k messages per round, -x mixed, -X phase length; the
     * rest are the common flags of common.h (-s sizes, -r rounds, -w warm-up rounds). */
    int percents[16] = {0, 10, 25, 50, 75, 90, 100}, npct = 7, k = 64, mixed = 0, phase = 8;
    double cell_ms = 100;
    char *rest[64];
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-p") && i + 1 < argc) {
            char buf[256];
            npct = 0;
            snprintf(buf, sizeof buf, "%s", argv[++i]);
            for (char *t = strtok(buf, ","); t && npct < 16; t = strtok(NULL, ","))
                percents[npct++] = atoi(t);
        } else if (!strcmp(argv[i], "-k") && i + 1 < argc) {
            k = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-x")) {
            mixed = 1;
        } else if (!strcmp(argv[i], "-X") && i + 1 < argc) {
            phase = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-T") && i + 1 < argc) {
            cell_ms = atof(argv[++i]);
        } else if (!strcmp(argv[i], "-P") && i + 1 < argc) {
            for (char *t = strtok(argv[++i], ","); t && nsettings < MAX_SETTINGS; t = strtok(NULL, ","))
                setting_names[nsettings++] = t;
        } else if (nrest < 63) {
            rest[nrest++] = argv[i];
        }
    }
    struct bench_opts o = {.reps = 9, .warmup = 2, .target_ms = 1, .max_iters = 1};
    if (bench_parse(nrest, rest, &o, 1024, 4L << 20, 0) != 0 || k < 1 || k > 4096 || phase < 1 ||
        npct < 1 || !(cell_ms >= 0) || o.reps > MAX_ROUNDS) {
        if (rank == 0)
            bench_usage(argv[0], "throughput vs share of receives preposted; -p PERCENTS (default "
                        "0,10,25,50,75,90,100), -k MSGS per round (64), -x mixed workload, "
                        "-X rounds per phase (8); -r rounds per cell (9, at most 1000), more "
                        "when needed for a cell to last -T MS (100; 0: exactly -r) per setting; "
                        "-P SETTINGS (Protean): measure these protocol settings in one launch, "
                        "alternating round by round (with -x, pass by pass over the phases) "
                        "through the MPI_T control variable 'protocol'",
                        " [-p LIST] [-k MSGS] [-x] [-X ROUNDS] [-T MS] [-P LIST]");
        MPI_Finalize();
        return 2;
    }
    if (nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "prepost: needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    long maxsz = 1;
    size_t rb_bytes = 1;
    for (int i = 0; i < o.nsizes; i++) {
        size_t b = (size_t)o.sizes[i] * (size_t)msgs_for(o.sizes[i], k);
        if (o.sizes[i] > maxsz)
            maxsz = o.sizes[i];
        if (b > rb_bytes)
            rb_bytes = b;
    }
    unsigned char *sbuf = calloc((size_t)maxsz, 1);
    unsigned char *rbufs = calloc(rb_bytes, 1);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)k);
    if (!sbuf || !rbufs || !reqs)
        bench_die("out of memory");

    if (rank == 0)
        proto_open();
    if (nsettings == 0)
        nsettings = 1; /* the library's own setting, unnamed */
    else if (rank == 0 && !settings_open()) {
        fprintf(stderr, "prepost: -P needs Protean's MPI_T control variable 'protocol'\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0) {
        print_header(mixed ? "prepost-mixed" : "prepost", nranks, &o);
        printf("# measure: effective throughput, %d messages per round (fewer above 512 KiB), "
               "median of rounds; MB/s (10^6 bytes/s), higher is better\n", k);
        if (!mixed)
            printf("# rounds per cell: at least %d, as many as last ~%.0f ms (at most %d)\n",
                   o.reps, cell_ms, MAX_ROUNDS);
        if (setting_names[0])
            printf("# settings alternated round by round: %d\n", nsettings);
        printf("# columns: %s\n", mixed             ? "mixed MB_per_s"
                                  : setting_names[0] ? "size_bytes percent_preposted MB_per_s setting"
                                                     : "size_bytes percent_preposted MB_per_s");
    }
    if (rank < 2 && mixed) {
        /* Phases of 0% and 100% preposted receives, sizes cycling phase by phase. With several
         * settings, they take turns a whole pass over the sizes' phases at a time, in a fresh
         * random order every pass. */
        double total_t[MAX_SETTINGS] = {0}, total_b[MAX_SETTINGS] = {0};
        /* Bytes sent per protocol, per setting, size and phase (0%, 100%). */
        static unsigned long long mbytes[MAX_SETTINGS][BENCH_MAX_SIZES][2][3];
        static double mtime[MAX_SETTINGS][BENCH_MAX_SIZES][2], mdata[MAX_SETTINGS][BENCH_MAX_SIZES][2];
        int cycle = 2 * phase * o.nsizes, rounds = phase * 2 * o.reps;
        int passes = (rounds + cycle - 1) / cycle;
        unsigned seed = 4242u;
        for (int r = 0; r < o.warmup; r++)
            one_round(rank, o.sizes[0], msgs_for(o.sizes[0], k), 0, sbuf, rbufs, reqs);
        for (int pass = 0; pass < passes; pass++) {
            int order[MAX_SETTINGS];
            shuffle(order, nsettings, &seed);
            for (int jj = 0; jj < nsettings; jj++) {
                int j = order[jj];
                setting_use(rank, j);
                for (int rr = 0; rr < cycle; rr++) {
                    int si = (rr / (2 * phase)) % o.nsizes, ph = (rr / phase) % 2;
                    long size = o.sizes[si];
                    int kk = msgs_for(size, k);
                    unsigned long long before[3], after[3];
                    if (rank == 0 && proto_ok)
                        proto_read(before);
                    double t = one_round(rank, size, kk, ph ? kk : 0, sbuf, rbufs, reqs);
                    total_t[j] += t;
                    total_b[j] += (double)size * kk;
                    mtime[j][si][ph] += t;
                    mdata[j][si][ph] += (double)size * kk;
                    if (rank == 0 && proto_ok) {
                        proto_read(after);
                        for (int b = 0; b < 3; b++)
                            mbytes[j][si][ph][b] += after[b] - before[b];
                    }
                }
            }
        }
        for (int j = 0; rank == 0 && j < nsettings; j++) {
            const char *name = setting_names[j] ? setting_names[j] : "";
            for (int si = 0; proto_ok && si < o.nsizes; si++)
                for (int ph = 0; ph < 2; ph++) {
                    unsigned long long *b = mbytes[j][si][ph];
                    printf("# protocols %ld %d %s%seager=%llu rndv=%llu split=%llu phase_MB_per_s=%.1f\n",
                           o.sizes[si], ph ? 100 : 0, name, *name ? " " : "", b[0], b[1], b[2],
                           mdata[j][si][ph] / mtime[j][si][ph] / 1e6);
                }
            printf("mixed %.1f%s%s\n", total_b[j] / total_t[j] / 1e6, *name ? " " : "", name);
        }
    } else if (rank < 2) {
        double *v = malloc(sizeof(double) * MAX_ROUNDS * (size_t)nsettings);
        if (!v)
            bench_die("out of memory");
        for (int si = 0; si < o.nsizes; si++) {
            long size = o.sizes[si];
            int kk = msgs_for(size, k);
            for (int pi = 0; pi < npct; pi++) {
                int npre = (int)((long)kk * percents[pi] / 100);
                unsigned long long bytes[MAX_SETTINGS][3] = {{0}};
                double warm = 0;
                for (int w = 0; w < o.warmup; w++)
                    for (int j = 0; j < nsettings; j++) {
                        setting_use(rank, j);
                        warm += one_round(rank, size, kk, npre, sbuf, rbufs, reqs);
                    }
                /* Rounds in this cell: rank 0 decides from the warm-up's pace. */
                int rounds = o.reps;
                if (rank == 0) {
                    if (o.warmup > 0 && warm > 0) {
                        double want = cell_ms * 1e-3 / (warm / (o.warmup * nsettings));
                        if (want > MAX_ROUNDS)
                            want = MAX_ROUNDS;
                        if (want > rounds)
                            rounds = (int)want;
                    }
                    MPI_Send(&rounds, 1, MPI_INT, 1, TAG_COUNT, MPI_COMM_WORLD);
                } else {
                    MPI_Recv(&rounds, 1, MPI_INT, 0, TAG_COUNT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                /* With several settings, each round runs them all in a fresh random order, so
                 * that drifts of the machine's speed fall on all alike and no setting always
                 * follows the same one (a round of eager messages nobody waits for leaves
                 * work behind for the next). Only rank 0 needs the order. */
                unsigned seed = 12345u + 977u * (unsigned)(si * npct + pi);
                for (int r = 0; r < rounds; r++) {
                    int order[MAX_SETTINGS];
                    shuffle(order, nsettings, &seed);
                    for (int jj = 0; jj < nsettings; jj++) {
                        int j = order[jj];
                        unsigned long long before[3], after[3];
                        setting_use(rank, j);
                        if (rank == 0 && proto_ok)
                            proto_read(before);
                        double t = one_round(rank, size, kk, npre, sbuf, rbufs, reqs);
                        if (rank == 0 && proto_ok) {
                            proto_read(after);
                            for (int b = 0; b < 3; b++)
                                bytes[j][b] += after[b] - before[b];
                        }
                        v[(size_t)j * MAX_ROUNDS + r] = t > 0 ? (double)size * kk / t / 1e6 : 0;
                    }
                }
                for (int j = 0; rank == 0 && j < nsettings; j++) {
                    const char *name = setting_names[j] ? setting_names[j] : "";
                    if (proto_ok)
                        printf("# protocols %ld %d %s%seager=%llu rndv=%llu split=%llu\n", size,
                               percents[pi], name, *name ? " " : "", bytes[j][0], bytes[j][1],
                               bytes[j][2]);
                    printf("%ld %d %.1f%s%s\n", size, percents[pi],
                           median(v + (size_t)j * MAX_ROUNDS, rounds), *name ? " " : "", name);
                    fflush(stdout);
                }
            }
        }
        free(v);
    }
    if (proto_inited > 1)
        MPI_T_pvar_session_free(&proto_session);
    if (proto_inited)
        MPI_T_finalize();
    bench_done(rank);
    free(sbuf);
    free(rbufs);
    free(reqs);
    MPI_Finalize();
    return 0;
}
