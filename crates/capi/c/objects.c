/*
 * Objects that mpi.h declares extern, and the predefined attribute copy function.
 *
 * Programs only ever compare these addresses with arguments they pass back to us, so each just
 * needs a distinct, non-null address.  Sizes must still match MPICH's: a non-PIE executable
 * built against libmpich gets copy relocations sized from the library it was linked with.
 */
#include <mpi.h>

/* Fortran status arrays a C caller can hand to MPI_Status_f2c and friends. */
static MPI_Fint f_status_ignore[MPI_F_STATUS_SIZE];
static MPI_Fint f_statuses_ignore[MPI_F_STATUS_SIZE];
MPI_Fint *MPI_F_STATUS_IGNORE = f_status_ignore;
MPI_Fint *MPI_F_STATUSES_IGNORE = f_statuses_ignore;

/* The Fortran 2008 binding refers to these by name. */
MPI_F08_status MPIR_F08_MPI_STATUS_IGNORE_OBJ;
MPI_F08_status MPIR_F08_MPI_STATUSES_IGNORE_OBJ[1];
int MPIR_F08_MPI_IN_PLACE;
int MPIR_F08_MPI_BOTTOM;
MPI_F08_status *MPI_F08_STATUS_IGNORE = &MPIR_F08_MPI_STATUS_IGNORE_OBJ;
MPI_F08_status *MPI_F08_STATUSES_IGNORE = MPIR_F08_MPI_STATUSES_IGNORE_OBJ;

/* Weight-array sentinels for the distributed graph constructors. */
static int unweighted_mark;
static int weights_empty_mark;
int *const MPI_UNWEIGHTED = &unweighted_mark;
int *const MPI_WEIGHTS_EMPTY = &weights_empty_mark;

/* MPI_T: "every handle of this session" for MPI_T_pvar_start/stop/reset. */
static char pvar_all_handles_mark;
struct MPIR_T_pvar_handle_s *const MPI_T_PVAR_ALL_HANDLES =
    (struct MPIR_T_pvar_handle_s *)&pvar_all_handles_mark;

/* MPI_DUP_FN, MPI_COMM_DUP_FN, MPI_TYPE_DUP_FN and MPI_WIN_DUP_FN: the copy gets the same
 * attribute value.  attribute_val_out points at a void * slot of the new object. */
int MPIR_Dup_fn(MPI_Comm oldcomm, int keyval, void *extra_state, void *attribute_val_in,
                void *attribute_val_out, int *flag)
{
    (void)oldcomm;
    (void)keyval;
    (void)extra_state;
    *(void **)attribute_val_out = attribute_val_in;
    *flag = 1;
    return MPI_SUCCESS;
}
