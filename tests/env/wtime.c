/*
 * MPI_Wtime and MPI_Wtick: the tick is positive and at most 10 ms; times are finite and
 * never decrease over many consecutive calls; a 50 ms sleep advances the clock by at least
 * 45 ms and (sanity only) less than 100 s; MPI_WTIME_IS_GLOBAL, if present, is 0 or 1.
 * No upper bound that depends on machine load is asserted. Runs as a singleton too.
 */
#include "util.h"
#include <math.h>

int main(int argc, char **argv)
{
    double tick, t0, t1, prev, now;
    int i, flag, *val;

    tu_init(&argc, &argv);
    tick = MPI_Wtick();
    CHECK_MSG(tick > 0 && tick <= 0.01, "MPI_Wtick() = %g", tick);

    prev = MPI_Wtime();
    CHECK(isfinite(prev));
    for (i = 0; i < 200000; i++) {
        now = MPI_Wtime();
        CHECK_MSG(now >= prev, "MPI_Wtime went back from %.9f to %.9f", prev, now);
        prev = now;
    }
    t0 = MPI_Wtime();
    tu_sleep_ms(50);
    t1 = MPI_Wtime();
    CHECK_MSG(t1 - t0 >= 0.045, "a 50 ms sleep took %.6f s by MPI_Wtime", t1 - t0);
    CHECK_MSG(t1 - t0 < 100, "a 50 ms sleep took %.6f s by MPI_Wtime", t1 - t0);

    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &val, &flag));
    if (flag)
        CHECK_MSG(*val == 0 || *val == 1, "MPI_WTIME_IS_GLOBAL = %d", *val);
    return tu_finish();
}
