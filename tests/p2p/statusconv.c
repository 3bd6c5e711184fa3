/*
 * p2p/statusconv: the status conversions between C, Fortran and Fortran 2008 forms
 * (MPI_Status_c2f, f2c, c2f08, f082c, f082f, f2f08) keep every field (source, tag, error,
 * count, cancelled), and refuse the ignore objects.
 */
#include "util.h"

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int n;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Status c, c2;
    memset(&c, 0, sizeof c);
    c.MPI_SOURCE = 3;
    c.MPI_TAG = 44;
    c.MPI_ERROR = MPI_ERR_TRUNCATE;
    MPI_Status_set_elements(&c, MPI_INT, 123);
    MPI_Status_set_cancelled(&c, 1);
    MPI_Fint f[MPI_F_STATUS_SIZE], f2[MPI_F_STATUS_SIZE];
    MPI_F08_status f08;
    CHECK_MPI(MPI_Status_c2f(&c, f));
    CHECK_EQ(f[MPI_F_SOURCE], 3);
    CHECK_EQ(f[MPI_F_TAG], 44);
    CHECK_EQ(f[MPI_F_ERROR], MPI_ERR_TRUNCATE);
    CHECK_MPI(MPI_Status_f2f08(f, &f08));
    CHECK_EQ(f08.MPI_SOURCE, 3);
    CHECK_MPI(MPI_Status_f082f(&f08, f2));
    CHECK_MPI(MPI_Status_f2c(f2, &c2));
    CHECK_EQ(c2.MPI_SOURCE, 3);
    CHECK_EQ(c2.MPI_TAG, 44);
    CHECK_EQ(c2.MPI_ERROR, MPI_ERR_TRUNCATE);
    MPI_Get_count(&c2, MPI_INT, &n);
    CHECK_EQ(n, 123);
    int flag;
    MPI_Test_cancelled(&c2, &flag);
    CHECK(flag);
    memset(&c2, 0, sizeof c2);
    CHECK_MPI(MPI_Status_c2f08(&c, &f08));
    CHECK_MPI(MPI_Status_f082c(&f08, &c2));
    CHECK(!memcmp(&c, &c2, sizeof c));
    CHECK_CLASS(MPI_Status_c2f(MPI_STATUS_IGNORE, f), MPI_ERR_ARG);
    CHECK_CLASS(MPI_Status_f2c(MPI_F_STATUS_IGNORE, &c2), MPI_ERR_ARG);

    return tu_finish();
}
