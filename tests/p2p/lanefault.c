/*
 * A lane that breaks in the middle of a striped message (Protean: PROTEAN_TCP_LANES=4 and the
 * fault injection PROTEAN_TCP_FAULT=lane=1@BYTES, which resets lane 1 of the sender once it
 * carried BYTES). The message is neither lost quietly nor corrupted: each of a series of 8 MiB
 * messages from rank 0 to rank 1 (under MPI_ERRORS_RETURN) either arrives whole and right, or
 * its send and receive fail with an error whose text names the other process. Once an
 * operation failed, later ones with that peer fail too (no hang). Rank 1 reports how many
 * arrived and how many failed; with the fault set, at least one must have failed.
 * Exactly 2 ranks.
 */
#include "util.h"

#define N ((size_t)8 << 20)
#define MSGS 6

static int names_peer(int rc, int peer)
{
    char text[MPI_MAX_ERROR_STRING], want[32];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    snprintf(want, sizeof want, "%d", peer);
    TU_LOG("error: %s", text);
    return strstr(text, want) != NULL && (strstr(text, "process") || strstr(text, "rank"));
}

int main(int argc, char **argv)
{
    int ok = 0, failed = 0, rc;
    unsigned char *buf;
    const char *fault = getenv("PROTEAN_TCP_FAULT");

    tu_init(&argc, &argv);
    CHECK_MSG(tu_size == 2, "needs exactly 2 ranks, has %d", tu_size);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    buf = tu_malloc(N);
    for (int k = 0; k < MSGS; k++) {
        if (tu_rank == 0) {
            tu_fill(buf, N, TU_SEED(0, 1, k));
            rc = MPI_Send(buf, (int)N, MPI_BYTE, 1, k, MPI_COMM_WORLD);
        } else {
            memset(buf, 0, N);
            rc = MPI_Recv(buf, (int)N, MPI_BYTE, 0, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        if (rc == MPI_SUCCESS) {
            if (tu_rank == 1)
                CHECK_BUF(buf, N, TU_SEED(0, 1, k));
            CHECK_MSG(failed == 0, "message %d went through after an earlier one failed", k);
            ok++;
        } else {
            CHECK_MSG(names_peer(rc, 1 - tu_rank), "the error of message %d does not name "
                      "process %d", k, 1 - tu_rank);
            failed++;
        }
    }
    if (tu_rank == 1) {
        printf("lanefault: %d arrived whole, %d failed%s\n", ok, failed,
               fault && *fault ? " (fault injected)" : "");
        if (fault && *fault)
            CHECK_MSG(failed > 0, "PROTEAN_TCP_FAULT=%s, yet every message arrived", fault);
        else
            CHECK_MSG(failed == 0, "no fault injected, yet %d messages failed", failed);
    }
    free(buf);
    /* The job ends here: with a lost peer a collective MPI_Finalize cannot complete. */
    fflush(stdout);
    if (tu_rank == 0)
        printf(" No Errors\n");
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
