/*
 * bench/io: MPI-IO on a file in $IO_DIR (default /tmp), every rank at once. Prints
 * "<op> <size_bytes> <median> <unit>" lines, the median over -r repetitions of the time per
 * call of the slowest rank (each repetition: a barrier, then -k calls):
 *
 *   open-close     MPI_File_open (create) + MPI_File_close over MPI_COMM_WORLD (us)
 *   write-at-all   MPI_File_write_at_all of size bytes per rank, contiguous, rank r at r*size
 *   read-at-all    MPI_File_read_at_all of the same (us)
 *   write-view     MPI_File_write_all of size bytes per rank through a view that interleaves
 *                  the ranks in 8-byte blocks (a vector filetype: size/8 pieces per call)
 *   read-view      MPI_File_read_all of the same (us)
 *   write-shared   MPI_File_write_shared of size bytes, every rank at once (us)
 *   write-ordered  MPI_File_write_ordered of size bytes (us)
 *
 * The data written is checked once per operation and size. The page cache holds the file:
 * these are the costs of the library's path, not of a disk.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int reps = 5, calls = 20, rank, size;
static char path[512];

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int l = 0;
    MPI_Error_string(rc, s, &l);
    fprintf(stderr, "bench/io: rank %d: %s: %s\n", rank, what, s);
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define OK(call)                                                                           \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != MPI_SUCCESS)                                                            \
            die(#call, rc_);                                                               \
    } while (0)

enum op { WRITE_AT, READ_AT, WRITE_VIEW, READ_VIEW, WRITE_SHARED, WRITE_ORDERED };
static const char *names[] = {"write-at-all", "read-at-all", "write-view", "read-view",
                              "write-shared", "write-ordered"};

static void fill(char *b, size_t n, int r, int k)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (char)(r * 31 + k * 7 + i);
}

static void once(MPI_File fh, enum op op, char *buf, int n, int k)
{
    MPI_Status st;
    MPI_Offset at = (MPI_Offset)rank * n + (MPI_Offset)k * n * size;
    switch (op) {
    case WRITE_AT: OK(MPI_File_write_at_all(fh, at, buf, n, MPI_BYTE, &st)); break;
    case READ_AT: OK(MPI_File_read_at_all(fh, at, buf, n, MPI_BYTE, &st)); break;
    case WRITE_VIEW: OK(MPI_File_write_all(fh, buf, n, MPI_BYTE, &st)); break;
    case READ_VIEW: OK(MPI_File_read_all(fh, buf, n, MPI_BYTE, &st)); break;
    case WRITE_SHARED: OK(MPI_File_write_shared(fh, buf, n, MPI_BYTE, &st)); break;
    case WRITE_ORDERED: OK(MPI_File_write_ordered(fh, buf, n, MPI_BYTE, &st)); break;
    }
}

static void set_view(MPI_File fh, enum op op, MPI_Datatype ft)
{
    if (op == WRITE_VIEW || op == READ_VIEW)
        OK(MPI_File_set_view(fh, (MPI_Offset)rank * 8, MPI_BYTE, ft, "native", MPI_INFO_NULL));
    else
        OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
}

static void bench(enum op op, int n)
{
    MPI_File fh;
    OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh));
    MPI_Datatype blk, ft;
    MPI_Type_contiguous(8, MPI_BYTE, &blk);
    MPI_Type_create_resized(blk, 0, 8 * size, &ft);
    MPI_Type_commit(&ft);
    char *buf = malloc(n), *chk = malloc(n);
    /* One buffer per call, filled before the clock starts. */
    char **data = malloc(sizeof(char *) * calls);
    for (int k = 0; k < calls; k++) {
        data[k] = malloc(n);
        fill(data[k], n, rank, k);
    }
    /* Reads need the data there: write it once first (and check it). */
    set_view(fh, op, ft);
    if (op == READ_AT || op == READ_VIEW) {
        for (int k = 0; k < calls; k++)
            once(fh, op == READ_AT ? WRITE_AT : WRITE_VIEW, data[k], n, k);
        OK(MPI_File_sync(fh));
        MPI_Barrier(MPI_COMM_WORLD);
        OK(MPI_File_sync(fh));
    }
    double *t = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        set_view(fh, op, ft);
        if (op == WRITE_SHARED || op == WRITE_ORDERED)
            OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int k = 0; k < calls; k++) {
            int reads = op == READ_AT || op == READ_VIEW;
            once(fh, op, reads ? buf : data[k], n, k);
            if ((op == READ_AT || op == READ_VIEW) && r == 0) {
                fill(chk, n, rank, k);
                if (memcmp(chk, buf, n) != 0) {
                    fprintf(stderr, "bench/io: %s %d: wrong data read\n", names[op], n);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
        }
        double dt = (MPI_Wtime() - t0) / calls, slowest;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[r] = slowest * 1e6;
    }
    if (op == WRITE_AT || op == WRITE_VIEW) {
        /* The first repetition's data, read back through a byte view. */
        OK(MPI_File_sync(fh));
        MPI_Barrier(MPI_COMM_WORLD);
        OK(MPI_File_sync(fh));
        set_view(fh, op, ft);
        MPI_Status st;
        for (int k = 0; k < calls; k++) {
            if (op == WRITE_AT)
                OK(MPI_File_read_at(fh, (MPI_Offset)rank * n + (MPI_Offset)k * n * size, buf, n,
                                    MPI_BYTE, &st));
            else
                OK(MPI_File_read_at(fh, (MPI_Offset)k * n, buf, n, MPI_BYTE, &st));
            fill(chk, n, rank, k);
            if (memcmp(chk, buf, n) != 0) {
                fprintf(stderr, "bench/io: %s %d: wrong data written\n", names[op], n);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
    }
    qsort(t, reps, sizeof(double), cmp);
    if (rank == 0)
        printf("%s %d %.3f us\n", names[op], n, t[reps / 2]);
    MPI_Type_free(&ft);
    MPI_Type_free(&blk);
    OK(MPI_File_close(&fh));
    for (int k = 0; k < calls; k++)
        free(data[k]);
    free(data);
    free(buf);
    free(chk);
    free(t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int opt;
    while ((opt = getopt(argc, argv, "r:k:")) != -1) {
        if (opt == 'r')
            reps = atoi(optarg);
        else if (opt == 'k')
            calls = atoi(optarg);
    }
    const char *dir = getenv("IO_DIR") ? getenv("IO_DIR") : "/tmp";
    if (rank == 0)
        snprintf(path, sizeof path, "%s/protean-bench-io-%d", dir, (int)getpid());
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);

    /* open-close */
    double *t = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int k = 0; k < calls; k++) {
            MPI_File fh;
            OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL,
                             &fh));
            OK(MPI_File_close(&fh));
        }
        double dt = (MPI_Wtime() - t0) / calls, slowest;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[r] = slowest * 1e6;
    }
    qsort(t, reps, sizeof(double), cmp);
    if (rank == 0)
        printf("open-close 0 %.3f us\n", t[reps / 2]);
    free(t);

    int sizes[] = {64, 4096, 65536, 1 << 20};
    for (int op = WRITE_AT; op <= WRITE_ORDERED; op++)
        for (int s = 0; s < 4; s++) {
            if ((op == WRITE_SHARED || op == WRITE_ORDERED) && sizes[s] > 65536)
                continue;
            bench((enum op)op, sizes[s]);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        unlink(path);
    MPI_Finalize();
    return 0;
}
