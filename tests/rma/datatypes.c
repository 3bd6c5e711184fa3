/*
 * rma/datatypes: one-sided operations with derived datatypes on both sides and large
 * transfers. A struct type at the origin against a vector of its basic type at the target;
 * an indexed target with blocks in decreasing order; MPI_Get_accumulate whose result buffer
 * has yet another layout; transfers of 4 MiB (cut into many frames where the target is
 * reached by messages) with a pattern checked byte by byte; memory attached to a dynamic
 * window in several regions, each reached; the large-count (_c) forms.
 */
#include "util.h"

#define BIG (4 << 20)

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int rank = tu_rank, size = tu_size;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* 1. Struct origin, vector target. */
    double *mem;
    MPI_Win win;
    const int N = 256;
    CHECK_MPI(MPI_Win_allocate_c(N * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    for (int i = 0; i < N; i++)
        mem[i] = -1;
    struct rec { int tag; double v[3]; char pad; double w; } recs[8];
    int bl[3] = {1, 3, 1};
    MPI_Aint disp[3] = {offsetof(struct rec, tag), offsetof(struct rec, v), offsetof(struct rec, w)};
    MPI_Datatype tys[3] = {MPI_INT, MPI_DOUBLE, MPI_DOUBLE};
    MPI_Datatype srec, rec, dvec;
    /* Only the doubles: the int is left out by giving it blocklength 0. */
    bl[0] = 0;
    CHECK_MPI(MPI_Type_create_struct(3, bl, disp, tys, &srec));
    CHECK_MPI(MPI_Type_create_resized(srec, 0, sizeof(struct rec), &rec));
    CHECK_MPI(MPI_Type_commit(&rec));
    CHECK_MPI(MPI_Type_vector(8 * 4, 1, 3, MPI_DOUBLE, &dvec));
    CHECK_MPI(MPI_Type_commit(&dvec));
    for (int i = 0; i < 8; i++) {
        recs[i].tag = -5;
        for (int k = 0; k < 3; k++)
            recs[i].v[k] = rank * 100 + i * 4 + k;
        recs[i].w = rank * 100 + i * 4 + 3;
    }
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Put_c(recs, 8, rec, right, 2, 1, dvec, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int j = 0; j < 32; j++)
        CHECK_MSG(mem[2 + 3 * j] == left * 100 + j, "element %d is %g", j, mem[2 + 3 * j]);
    CHECK(mem[3] == -1 && mem[1] == -1);
    CHECK_MPI(MPI_Win_fence(0, win)); /* the checks above are done before anyone goes on */
    /* Read it back into the struct layout through MPI_Get_c, and accumulate through it. */
    struct rec back[8];
    memset(back, 0, sizeof back);
    CHECK_MPI(MPI_Get_c(back, 8, rec, right, 2, 1, dvec, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Accumulate_c(recs, 8, rec, right, 2, 1, dvec, MPI_SUM, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < 8; i++) {
        CHECK(back[i].tag == 0);
        for (int k = 0; k < 3; k++)
            CHECK(back[i].v[k] == rank * 100 + i * 4 + k);
        CHECK(back[i].w == rank * 100 + i * 4 + 3);
    }
    for (int j = 0; j < 32; j++)
        CHECK(mem[2 + 3 * j] == 2 * (left * 100 + j));
    CHECK_MPI(MPI_Win_fence(0, win));

    /* 2. Indexed target in decreasing order; get-accumulate into a contiguous result. */
    int ibl[4] = {2, 1, 3, 1}, idisp[4] = {40, 30, 20, 10};
    MPI_Datatype idx;
    CHECK_MPI(MPI_Type_indexed(4, ibl, idisp, MPI_DOUBLE, &idx));
    CHECK_MPI(MPI_Type_commit(&idx));
    double add[7] = {1, 1, 1, 1, 1, 1, 1}, res[7];
    for (int i = 0; i < N; i++)
        mem[i] = i;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Get_accumulate_c(add, 7, MPI_DOUBLE, res, 7, MPI_DOUBLE, right, 0, 1, idx, MPI_SUM, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    double want[7] = {40, 41, 30, 20, 21, 22, 10};
    for (int i = 0; i < 7; i++)
        CHECK(res[i] == want[i]);
    CHECK(mem[40] == 41 && mem[41] == 42 && mem[30] == 31 && mem[10] == 11 && mem[11] == 11);
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK_MPI(MPI_Win_free(&win));

    /* 3. Large transfers with a pattern, every flavor that takes user memory or allocates. */
    for (int f = 0; f < 2; f++) {
        char *buf, *src = tu_malloc(BIG), *dst = tu_malloc(BIG);
        if (f == 0) {
            buf = tu_malloc(BIG);
            CHECK_MPI(MPI_Win_create_c(buf, BIG, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        } else {
            CHECK_MPI(MPI_Win_allocate(BIG, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &buf, &win));
        }
        tu_fill(src, BIG, TU_SEED(rank, right, f));
        CHECK_MPI(MPI_Win_lock_all(0, win));
        CHECK_MPI(MPI_Put(src, BIG, MPI_BYTE, right, 0, BIG, MPI_BYTE, win));
        CHECK_MPI(MPI_Win_flush_all(win));
        CHECK_MPI(MPI_Win_unlock_all(win));
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_BUF(buf, BIG, TU_SEED(left, rank, f));
        MPI_Request q;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, left, 0, win));
        CHECK_MPI(MPI_Rget_c(dst, BIG, MPI_BYTE, left, 0, BIG, MPI_BYTE, win, &q));
        CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Win_unlock(left, win));
        /* left's memory holds what left's left put there. */
        CHECK_BUF(dst, BIG, TU_SEED((left + size - 1) % size, left, f));
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_Win_free(&win));
        if (f == 0)
            free(buf);
        free(src);
        free(dst);
    }

    /* 4. A dynamic window with three attached regions; each rank reaches each region of its
     *    right neighbour, then detaches one and reattaches a new one. */
    MPI_Win dyn;
    CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &dyn));
    int *reg[3];
    MPI_Aint addr[3], raddr[3];
    for (int k = 0; k < 3; k++) {
        reg[k] = tu_malloc(64 * sizeof(int));
        for (int i = 0; i < 64; i++)
            reg[k][i] = -1;
        CHECK_MPI(MPI_Win_attach(dyn, reg[k], 64 * sizeof(int)));
        MPI_Get_address(reg[k], &addr[k]);
    }
    MPI_Sendrecv(addr, 3, MPI_AINT, left, 1, raddr, 3, MPI_AINT, right, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK_MPI(MPI_Win_fence(0, dyn));
    for (int k = 0; k < 3; k++) {
        int v[4] = {rank, k, rank + k, 77};
        CHECK_MPI(MPI_Put(v, 4, MPI_INT, right, raddr[k] + 8 * sizeof(int), 4, MPI_INT, dyn));
    }
    CHECK_MPI(MPI_Win_fence(0, dyn));
    for (int k = 0; k < 3; k++)
        CHECK(reg[k][8] == left && reg[k][9] == k && reg[k][10] == left + k && reg[k][11] == 77);
    /* An address outside the attached memory is an error at the origin or the target. */
    CHECK_MPI(MPI_Win_set_errhandler(dyn, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, dyn));
    CHECK_MPI(MPI_Win_detach(dyn, reg[1]));
    if (!tu_quirk("unchecked_attach")) {
        CHECK_CLASS(MPI_Win_detach(dyn, reg[1]), MPI_ERR_RMA_ATTACH);
        CHECK_CLASS(MPI_Win_attach(dyn, reg[0] + 4, 8), MPI_ERR_RMA_ATTACH);
    }
    for (int k = 0; k < 3; k++)
        if (k != 1)
            CHECK_MPI(MPI_Win_detach(dyn, reg[k]));
    CHECK_MPI(MPI_Win_free(&dyn));
    for (int k = 0; k < 3; k++)
        free(reg[k]);

    MPI_Type_free(&rec);
    MPI_Type_free(&srec);
    MPI_Type_free(&dvec);
    MPI_Type_free(&idx);
    return tu_finish();
}
