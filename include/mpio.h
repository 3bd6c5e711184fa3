/*
 * mpio.h -- MPI-IO declarations.  Protean keeps all of MPI, I/O included, in mpi.h; this file
 * exists so that programs written for ROMIO-based implementations, which include <mpio.h>, build.
 */
#include "mpi.h"
