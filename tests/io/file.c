/*
 * io/file: MPI-IO end to end. Opening (the access-mode errors, a missing file, MPI_MODE_EXCL
 * on an existing one, all returned by MPI_FILE_NULL's default handler), explicit offsets
 * with the status's count (a read past the end comes back short), a strided view that
 * interleaves the processes' records and a byte view that reads them back, a strided memory
 * type, the individual pointer (seek, get_position, get_byte_offset, MPI_SEEK_END through
 * a view), the shared pointer from every process at once (each record lands exactly once),
 * ordered writes in rank order, nonblocking and split collective forms (and an end call
 * without its begin), atomic mode, external32 (big-endian in the file), a file opened
 * read-only refusing writes, a user error handler, MPI_File_c2f/f2c, set_size/preallocate/
 * get_size, get_group/get_amode/get_info, and MPI_MODE_DELETE_ON_CLOSE.
 */
#include "util.h"

#include <unistd.h>

#define REC 4 /* ints per record */

static int handled = 0;
static MPI_File handled_file;
static void errfn(MPI_File *f, int *code, ...)
{
    MPI_Error_class(*code, &handled);
    handled_file = *f;
}

/* The class an error must have (a peer with quirk io_classes: any error). */
#define CHECK_ERR(rc, cls)                                                                 \
    do {                                                                                   \
        int rc_ = (rc);                                                                    \
        if (tu_quirk("io_classes"))                                                        \
            CHECK(rc_ != MPI_SUCCESS);                                                     \
        else                                                                               \
            CHECK_CLASS(rc_, cls);                                                         \
    } while (0)

static int exists(const char *p)
{
    return access(p, F_OK) == 0;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int rank = tu_rank, size = tu_size;
    MPI_Comm comm = MPI_COMM_WORLD;
    char name[256];
    if (rank == 0)
        snprintf(name, sizeof name, "%s/protean-io-%d-%ld", tu_scratch(), (int)getpid(),
                 (long)time(NULL));
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm);
    MPI_File fh;
    MPI_Status st;
    int n;

    /* Errors of opening go to MPI_FILE_NULL's handler: MPI_ERRORS_RETURN by default. */
    MPI_Errhandler eh;
    CHECK_MPI(MPI_File_get_errhandler(MPI_FILE_NULL, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    CHECK_ERR(MPI_File_open(comm, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), MPI_ERR_NO_SUCH_FILE);
    CHECK(fh == MPI_FILE_NULL);
    CHECK_ERR(MPI_File_open(comm, name, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh),
                MPI_ERR_AMODE);
    CHECK_ERR(MPI_File_open(comm, name, MPI_MODE_RDWR | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh),
                MPI_ERR_AMODE);
    CHECK_MPI(MPI_File_open(comm, name, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL,
                            MPI_INFO_NULL, &fh));
    int amode;
    CHECK_MPI(MPI_File_get_amode(fh, &amode));
    CHECK_EQ(amode, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL);
    MPI_File again;
    CHECK_ERR(MPI_File_open(comm, name, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL,
                              MPI_INFO_NULL, &again),
                MPI_ERR_FILE_EXISTS);
    MPI_Group fg, cg;
    int cmp;
    CHECK_MPI(MPI_File_get_group(fh, &fg));
    MPI_Comm_group(comm, &cg);
    MPI_Group_compare(fg, cg, &cmp);
    CHECK_EQ(cmp, MPI_IDENT);
    MPI_Group_free(&fg);
    MPI_Group_free(&cg);
    CHECK(MPI_File_f2c(MPI_File_c2f(fh)) == fh);
    CHECK(MPI_File_c2f(MPI_FILE_NULL) == 0 && MPI_File_f2c(0) == MPI_FILE_NULL);

    /* Explicit offsets: record r holds r*100+i; each process writes its own records. */
    int w[REC], r[2 * REC];
    for (int k = 0; k < 3; k++) {
        int rec = k * size + rank;
        for (int i = 0; i < REC; i++)
            w[i] = rec * 100 + i;
        CHECK_MPI(MPI_File_write_at(fh, (MPI_Offset)rec * sizeof w, w, REC, MPI_INT, &st));
        MPI_Get_count(&st, MPI_INT, &n);
        CHECK_EQ(n, REC);
    }
    CHECK_MPI(MPI_File_sync(fh));
    MPI_Barrier(comm);
    CHECK_MPI(MPI_File_sync(fh));
    MPI_Offset fsize;
    CHECK_MPI(MPI_File_get_size(fh, &fsize));
    CHECK_EQ((int)fsize, 3 * size * (int)sizeof w);
    int last = 3 * size - 1;
    /* The last record and past it: half the buffer comes back. */
    CHECK_MPI(MPI_File_read_at(fh, (MPI_Offset)last * sizeof w, r, 2 * REC, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK_EQ(n, REC);
    for (int i = 0; i < REC; i++)
        CHECK_EQ(r[i], last * 100 + i);

    /* A strided view: this process sees every size-th record from its own. */
    MPI_Datatype rect, ftype;
    MPI_Type_contiguous(REC, MPI_INT, &rect);
    MPI_Type_create_resized(rect, 0, (MPI_Aint)size * sizeof w, &ftype);
    MPI_Type_commit(&ftype);
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * sizeof w, MPI_INT, ftype, "native",
                                MPI_INFO_NULL));
    MPI_Offset pos, disp;
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK_EQ((int)pos, 0);
    CHECK_MPI(MPI_File_get_byte_offset(fh, REC + 1, &disp));
    CHECK_EQ((int)disp, (size + rank) * (int)sizeof w + 4);
    CHECK_MPI(MPI_File_seek(fh, 0, MPI_SEEK_END));
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK((int)pos == 3 * REC || tu_quirk("seek_end_view"));
    CHECK_MPI(MPI_File_seek(fh, REC, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_read_all(fh, r, REC, MPI_INT, &st));
    for (int i = 0; i < REC; i++)
        CHECK_EQ(r[i], (size + rank) * 100 + i);
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK_EQ((int)pos, 2 * REC);
    CHECK_ERR(MPI_File_seek(fh, -3 * REC, MPI_SEEK_CUR), MPI_ERR_ARG);
    /* Overwrite this process's records through the view with a strided memory type: every
     * other int of a buffer twice as long. */
    int big[2 * 3 * REC];
    for (int i = 0; i < 3 * REC; i++) {
        big[2 * i] = -(rank * 1000 + i);
        big[2 * i + 1] = 777;
    }
    MPI_Datatype every_other;
    MPI_Type_vector(3 * REC, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    CHECK_MPI(MPI_File_write_at_all(fh, 0, big, 1, every_other, &st));
    MPI_Get_count(&st, every_other, &n);
    CHECK_EQ(n, 1);
    /* A collective write that fails at one process fails everywhere, and nobody waits for
     * it (with a strided view every process first tells the others what it writes). */
    if (size > 1 && !tu_quirk("coll_error_hangs")) {
        int rc = MPI_File_write_at_all(fh, 0, big, rank == 0 ? -1 : 1, every_other, &st);
        if (rank == 0)
            CHECK_CLASS(rc, MPI_ERR_COUNT);
        else
            CHECK_CLASS(rc, MPI_ERR_IO);
    }
    MPI_File_sync(fh);
    MPI_Barrier(comm);
    MPI_File_sync(fh);
    /* Back to bytes: the whole file, records interleaved by rank. */
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    int *all = malloc((size_t)3 * size * sizeof w);
    CHECK_MPI(MPI_File_read_at(fh, 0, all, 3 * size * REC, MPI_INT, &st));
    for (int rec = 0; rec < 3 * size; rec++)
        for (int i = 0; i < REC; i++) {
            int owner = rec % size, k = rec / size;
            CHECK_EQ(all[rec * REC + i], -(owner * 1000 + k * REC + i));
        }
    MPI_Type_free(&every_other);

    /* Shared pointer: every process appends 5 tagged records at once. (Protean's
     * MPI_File_set_size waits for every process's earlier accesses; MPICH's and Open MPI's
     * do not, hence the barrier.) */
    MPI_Barrier(comm);
    CHECK_MPI(MPI_File_set_size(fh, 0));
    CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < REC; i++)
            w[i] = rank * 10 + k;
        CHECK_MPI(MPI_File_write_shared(fh, w, REC, MPI_INT, &st));
    }
    MPI_File_sync(fh);
    MPI_Barrier(comm);
    MPI_File_sync(fh);
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK_EQ((int)pos, 5 * size * (int)sizeof w);
    MPI_Barrier(comm); /* read by all before anyone moves it */
    int *seen = calloc((size_t)size * 5, sizeof(int));
    int *recs = malloc((size_t)5 * size * sizeof w);
    CHECK_MPI(MPI_File_read_at(fh, 0, recs, 5 * size * REC, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK_EQ(n, 5 * size * REC);
    int prev[64];
    for (int p = 0; p < size && p < 64; p++)
        prev[p] = -1;
    for (int rec = 0; rec < 5 * size; rec++) {
        int v = recs[rec * REC];
        for (int i = 1; i < REC; i++)
            CHECK_EQ(recs[rec * REC + i], v); /* no record torn by another */
        int p = v / 10, k = v % 10;
        CHECK(p >= 0 && p < size && k < 5);
        CHECK_EQ(seen[p * 5 + k], 0);
        seen[p * 5 + k] = 1;
        if (p < 64) {
            CHECK(k > prev[p]); /* one process's records in its order */
            prev[p] = k;
        }
    }
    free(seen);

    /* Ordered: rank order from the shared pointer, twice. */
    CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < rank + 1; i++)
            r[i] = k * 100 + rank;
        CHECK_MPI(MPI_File_write_ordered(fh, r, rank + 1, MPI_INT, &st));
    }
    MPI_File_sync(fh);
    MPI_Barrier(comm);
    MPI_File_sync(fh);
    int per = size * (size + 1) / 2;
    CHECK_MPI(MPI_File_read_at(fh, 0, recs, 2 * per, MPI_INT, &st));
    for (int k = 0, at = 0; k < 2; k++)
        for (int p = 0; p < size; p++)
            for (int i = 0; i < p + 1; i++)
                CHECK_EQ(recs[at++], k * 100 + p);
    /* ... and read back in order with the split collective form. */
    CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_read_ordered_begin(fh, r, rank + 1, MPI_INT));
    CHECK_MPI(MPI_File_read_ordered_end(fh, r, &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK_EQ(n, rank + 1);
    for (int i = 0; i < rank + 1; i++)
        CHECK_EQ(r[i], rank);
    CHECK(MPI_File_read_all_end(fh, r, &st) != MPI_SUCCESS || tu_quirk("split_unchecked"));
    MPI_Barrier(comm); /* everyone has read before the records change */

    /* Nonblocking forms. */
    MPI_Request rq[2];
    for (int i = 0; i < REC; i++)
        w[i] = 5000 + rank * REC + i;
    CHECK_MPI(MPI_File_iwrite_at(fh, (MPI_Offset)rank * sizeof w, w, REC, MPI_INT, &rq[0]));
    CHECK_MPI(MPI_Wait(&rq[0], &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK_EQ(n, REC);
    MPI_File_sync(fh);
    MPI_Barrier(comm);
    MPI_File_sync(fh);
    int peer = (rank + 1) % size;
    CHECK_MPI(MPI_File_iread_at_all(fh, (MPI_Offset)peer * sizeof w, r, REC, MPI_INT, &rq[1]));
    CHECK_MPI(MPI_Waitall(1, &rq[1], MPI_STATUSES_IGNORE));
    for (int i = 0; i < REC; i++)
        CHECK_EQ(r[i], 5000 + peer * REC + i);

    /* Atomic mode. */
    int flag;
    CHECK_MPI(MPI_File_get_atomicity(fh, &flag));
    CHECK(!flag);
    CHECK_MPI(MPI_File_set_atomicity(fh, 1));
    CHECK_MPI(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag);
    CHECK_MPI(MPI_File_write_at(fh, (MPI_Offset)rank * sizeof w, w, REC, MPI_INT, &st));
    CHECK_MPI(MPI_File_read_at(fh, (MPI_Offset)rank * sizeof w, r, REC, MPI_INT, &st));
    CHECK(memcmp(r, w, sizeof w) == 0);
    CHECK_MPI(MPI_File_set_atomicity(fh, 0));
    if (!tu_quirk("negative_offset"))
        CHECK_ERR(MPI_File_read_at(fh, -1, r, 1, MPI_INT, &st), MPI_ERR_ARG);

    /* external32: big-endian in the file. */
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL));
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_Datatype et, ft;
    CHECK_MPI(MPI_File_get_view(fh, &disp, &et, &ft, rep));
    CHECK(strcmp(rep, "external32") == 0 && et == MPI_INT && ft == MPI_INT && disp == 0);
    int one = 0x01020304;
    if (rank == 0)
        CHECK_MPI(MPI_File_write_at(fh, 0, &one, 1, MPI_INT, &st));
    MPI_File_sync(fh);
    MPI_Barrier(comm);
    MPI_File_sync(fh);
    unsigned char raw[4];
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at(fh, 0, raw, 4, MPI_BYTE, &st));
    CHECK(raw[0] == 1 && raw[1] == 2 && raw[2] == 3 && raw[3] == 4);
    CHECK_ERR(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "no-such-rep", MPI_INFO_NULL),
                MPI_ERR_UNSUPPORTED_DATAREP);

    /* A user error handler gets the file and the code. */
    MPI_Errhandler mine;
    CHECK_MPI(MPI_File_create_errhandler(errfn, &mine));
    CHECK_MPI(MPI_File_set_errhandler(fh, mine));
    CHECK_ERR(MPI_File_seek(fh, -1, MPI_SEEK_SET), MPI_ERR_ARG);
    CHECK(handled == MPI_ERR_ARG || (tu_quirk("io_classes") && handled != 0));
    CHECK(handled_file == fh);
    handled = 0;
    CHECK_MPI(MPI_File_call_errhandler(fh, MPI_ERR_IO));
    CHECK_EQ(handled, MPI_ERR_IO);
    CHECK_MPI(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN));
    MPI_Errhandler_free(&mine);

    /* Sizes (after everyone's writes: see the barrier before the first set_size). */
    MPI_Barrier(comm);
    CHECK_MPI(MPI_File_set_size(fh, 10));
    CHECK_MPI(MPI_File_get_size(fh, &fsize));
    CHECK((int)fsize == 10 || tu_quirk("set_size_late"));
    CHECK_MPI(MPI_File_preallocate(fh, 100));
    CHECK_MPI(MPI_File_preallocate(fh, 50));
    CHECK_MPI(MPI_File_get_size(fh, &fsize));
    CHECK_EQ((int)fsize, 100);
    MPI_Info info;
    CHECK_MPI(MPI_File_get_info(fh, &info));
    MPI_Info_free(&info);
    CHECK_MPI(MPI_File_close(&fh));
    CHECK(fh == MPI_FILE_NULL);

    /* Append: both pointers start at the end (100 bytes); shared writes go after it. */
    CHECK_MPI(MPI_File_open(comm, name, MPI_MODE_WRONLY | MPI_MODE_APPEND, MPI_INFO_NULL, &fh));
    MPI_Offset at;
    CHECK_MPI(MPI_File_get_position(fh, &at));
    CHECK_EQ((int)at, 100);
    CHECK_MPI(MPI_File_get_position_shared(fh, &at));
    CHECK_EQ((int)at, 100);
    MPI_Barrier(comm); /* everyone read it before anyone moves it */
    int tail = 1000 + rank;
    CHECK_MPI(MPI_File_write_shared(fh, &tail, 1, MPI_INT, &st));
    MPI_Barrier(comm);
    CHECK_MPI(MPI_File_get_size(fh, &fsize));
    CHECK_EQ((int)fsize, 100 + 4 * size);
    CHECK_MPI(MPI_File_close(&fh));

    /* Read-only: writes are refused; then delete on close. */
    CHECK_MPI(MPI_File_open(comm, name, MPI_MODE_RDONLY | MPI_MODE_DELETE_ON_CLOSE,
                            MPI_INFO_NULL, &fh));
    CHECK_ERR(MPI_File_write_at(fh, 0, w, 1, MPI_INT, &st), MPI_ERR_READ_ONLY);
    CHECK_CLASS(MPI_File_read_at(fh, 0, r, 1, MPI_INT, MPI_STATUS_IGNORE), MPI_SUCCESS);
    CHECK_MPI(MPI_File_close(&fh));
    CHECK(!exists(name));
    CHECK_ERR(MPI_File_delete(name, MPI_INFO_NULL), MPI_ERR_NO_SUCH_FILE);
    CHECK_ERR(MPI_File_close(&fh), MPI_ERR_FILE);

    MPI_Type_free(&ftype);
    MPI_Type_free(&rect);
    free(all);
    free(recs);
    tu_finish();
    return 0;
}
