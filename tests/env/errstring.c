/*
 * Error classes and strings: for every error class of the standard (MPI 3.1 ones always,
 * the MPI_T and MPI 4 ones when the header defines them) the value is distinct from the
 * others and between MPI_SUCCESS (0) and MPI_ERR_LASTCODE, MPI_Error_class maps it to
 * itself, and MPI_Error_string gives a non-empty NUL-terminated string shorter than
 * MPI_MAX_ERROR_STRING. Also user-defined classes and codes: MPI_Add_error_class,
 * MPI_Add_error_code, MPI_Add_error_string, and MPI_LASTUSEDCODE (the largest class in use)
 * following them.
 * Runs as a singleton too.
 */
#include "util.h"

struct cls {
    const char *name;
    int value;
};
#define C(x) {#x, x}

static const struct cls classes[] = {
    C(MPI_SUCCESS),
    C(MPI_ERR_BUFFER),
    C(MPI_ERR_COUNT),
    C(MPI_ERR_TYPE),
    C(MPI_ERR_TAG),
    C(MPI_ERR_COMM),
    C(MPI_ERR_RANK),
    C(MPI_ERR_REQUEST),
    C(MPI_ERR_ROOT),
    C(MPI_ERR_GROUP),
    C(MPI_ERR_OP),
    C(MPI_ERR_TOPOLOGY),
    C(MPI_ERR_DIMS),
    C(MPI_ERR_ARG),
    C(MPI_ERR_UNKNOWN),
    C(MPI_ERR_TRUNCATE),
    C(MPI_ERR_OTHER),
    C(MPI_ERR_INTERN),
    C(MPI_ERR_PENDING),
    C(MPI_ERR_IN_STATUS),
    C(MPI_ERR_ACCESS),
    C(MPI_ERR_AMODE),
    C(MPI_ERR_ASSERT),
    C(MPI_ERR_BAD_FILE),
    C(MPI_ERR_BASE),
    C(MPI_ERR_CONVERSION),
    C(MPI_ERR_DISP),
    C(MPI_ERR_DUP_DATAREP),
    C(MPI_ERR_FILE_EXISTS),
    C(MPI_ERR_FILE_IN_USE),
    C(MPI_ERR_FILE),
    C(MPI_ERR_INFO_KEY),
    C(MPI_ERR_INFO_NOKEY),
    C(MPI_ERR_INFO_VALUE),
    C(MPI_ERR_INFO),
    C(MPI_ERR_IO),
    C(MPI_ERR_KEYVAL),
    C(MPI_ERR_LOCKTYPE),
    C(MPI_ERR_NAME),
    C(MPI_ERR_NO_MEM),
    C(MPI_ERR_NOT_SAME),
    C(MPI_ERR_NO_SPACE),
    C(MPI_ERR_NO_SUCH_FILE),
    C(MPI_ERR_PORT),
    C(MPI_ERR_QUOTA),
    C(MPI_ERR_READ_ONLY),
    C(MPI_ERR_RMA_ATTACH),
    C(MPI_ERR_RMA_CONFLICT),
    C(MPI_ERR_RMA_RANGE),
    C(MPI_ERR_RMA_SHARED),
    C(MPI_ERR_RMA_SYNC),
    C(MPI_ERR_RMA_FLAVOR),
    C(MPI_ERR_SERVICE),
    C(MPI_ERR_SIZE),
    C(MPI_ERR_SPAWN),
    C(MPI_ERR_UNSUPPORTED_DATAREP),
    C(MPI_ERR_UNSUPPORTED_OPERATION),
    C(MPI_ERR_WIN),
#ifdef MPI_T_ERR_MEMORY
    C(MPI_T_ERR_MEMORY),
#endif
#ifdef MPI_T_ERR_NOT_INITIALIZED
    C(MPI_T_ERR_NOT_INITIALIZED),
#endif
#ifdef MPI_T_ERR_CANNOT_INIT
    C(MPI_T_ERR_CANNOT_INIT),
#endif
#ifdef MPI_T_ERR_INVALID_INDEX
    C(MPI_T_ERR_INVALID_INDEX),
#endif
#ifdef MPI_T_ERR_INVALID_ITEM
    C(MPI_T_ERR_INVALID_ITEM),
#endif
#ifdef MPI_T_ERR_INVALID_HANDLE
    C(MPI_T_ERR_INVALID_HANDLE),
#endif
#ifdef MPI_T_ERR_OUT_OF_HANDLES
    C(MPI_T_ERR_OUT_OF_HANDLES),
#endif
#ifdef MPI_T_ERR_OUT_OF_SESSIONS
    C(MPI_T_ERR_OUT_OF_SESSIONS),
#endif
#ifdef MPI_T_ERR_INVALID_SESSION
    C(MPI_T_ERR_INVALID_SESSION),
#endif
#ifdef MPI_T_ERR_CVAR_SET_NOT_NOW
    C(MPI_T_ERR_CVAR_SET_NOT_NOW),
#endif
#ifdef MPI_T_ERR_CVAR_SET_NEVER
    C(MPI_T_ERR_CVAR_SET_NEVER),
#endif
#ifdef MPI_T_ERR_PVAR_NO_STARTSTOP
    C(MPI_T_ERR_PVAR_NO_STARTSTOP),
#endif
#ifdef MPI_T_ERR_PVAR_NO_WRITE
    C(MPI_T_ERR_PVAR_NO_WRITE),
#endif
#ifdef MPI_T_ERR_PVAR_NO_ATOMIC
    C(MPI_T_ERR_PVAR_NO_ATOMIC),
#endif
#ifdef MPI_T_ERR_INVALID_NAME
    C(MPI_T_ERR_INVALID_NAME),
#endif
#ifdef MPI_T_ERR_INVALID
    C(MPI_T_ERR_INVALID),
#endif
#ifdef MPI_T_ERR_NOT_SUPPORTED
    C(MPI_T_ERR_NOT_SUPPORTED),
#endif
#ifdef MPI_ERR_SESSION
    C(MPI_ERR_SESSION),
#endif
#ifdef MPI_ERR_PROC_ABORTED
    C(MPI_ERR_PROC_ABORTED),
#endif
#ifdef MPI_ERR_VALUE_TOO_LARGE
    C(MPI_ERR_VALUE_TOO_LARGE),
#endif
#ifdef MPI_ERR_ERRHANDLER
    C(MPI_ERR_ERRHANDLER),
#endif
};

static void check_string(int code, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = -1;
    memset(s, 0x5A, sizeof s);
    CHECK_MPI(MPI_Error_string(code, s, &len));
    CHECK_MSG(len > 0 && len < MPI_MAX_ERROR_STRING, "%s: string length %d", what, len);
    CHECK_MSG(strnlen(s, sizeof s) == (size_t)len, "%s: string length %zu, resultlen %d", what,
              strnlen(s, sizeof s), len);
}

int main(int argc, char **argv)
{
    int n = (int)(sizeof classes / sizeof classes[0]), i, j, c, *last, flag;
    int uclass, ucode, ucode2;
    char s[MPI_MAX_ERROR_STRING];
    int len;

    tu_init(&argc, &argv);
    CHECK_EQ(MPI_SUCCESS, 0);
    for (i = 0; i < n; i++) {
        int v = classes[i].value;
        CHECK_MSG(v >= 0 && v <= MPI_ERR_LASTCODE, "%s = %d is outside 0..MPI_ERR_LASTCODE",
                  classes[i].name, v);
        CHECK_MSG(v != 0 || i == 0, "%s is 0", classes[i].name);
        for (j = 0; j < i; j++)
            CHECK_MSG(classes[j].value != v, "%s and %s are both %d", classes[j].name,
                      classes[i].name, v);
        c = -1;
        CHECK_MPI(MPI_Error_class(v, &c));
        CHECK_MSG(c == v, "MPI_Error_class(%s) = %d", classes[i].name, c);
        check_string(v, classes[i].name);
    }
    TU_LOG("%d error classes checked\n", n);

    /* User-defined error class and codes. */
    CHECK_MPI(MPI_Add_error_class(&uclass));
    CHECK_INT(uclass, >=, MPI_ERR_LASTCODE);
    for (i = 0; i < n; i++)
        CHECK(classes[i].value != uclass);
    CHECK_MPI(MPI_Add_error_code(uclass, &ucode));
    CHECK_MPI(MPI_Add_error_code(uclass, &ucode2));
    CHECK(ucode != ucode2 && ucode != uclass);
    CHECK_INT(ucode, >=, MPI_ERR_LASTCODE);
    CHECK_INT(ucode2, >=, MPI_ERR_LASTCODE);
    CHECK_MPI(MPI_Error_class(ucode, &c));
    CHECK_EQ(c, uclass);
    CHECK_MPI(MPI_Error_class(ucode2, &c));
    CHECK_EQ(c, uclass);
    /* (quirk "user_class_of_class": Open MPI 4.1 gives MPI_ERR_UNKNOWN here) */
    CHECK_MPI(MPI_Error_class(uclass, &c));
    if (!tu_quirk("user_class_of_class"))
        CHECK_EQ(c, uclass);
    CHECK_MPI(MPI_Add_error_string(ucode, "protean test: a user error code"));
    CHECK_MPI(MPI_Add_error_string(uclass, "protean test: a user error class"));
    CHECK_MPI(MPI_Error_string(ucode, s, &len));
    CHECK_MSG(strcmp(s, "protean test: a user error code") == 0, "string of user code: %s", s);
    CHECK_EQ(len, (int)strlen(s));
    CHECK_MPI(MPI_Error_string(uclass, s, &len));
    CHECK_MSG(strcmp(s, "protean test: a user error class") == 0, "string of user class: %s", s);
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
    CHECK(flag);
    CHECK_INT(*last, >=, uclass); /* the largest error class in use */

    /* A user code can be raised through a handler and comes back as the return value. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_EQ(MPI_Comm_call_errhandler(MPI_COMM_WORLD, ucode), MPI_SUCCESS);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

#if defined(PROTEAN) || defined(MPICH_NUMVERSION)
    if (!tu_quirk("delete_error")) {
        /* MPICH's MPIX_Delete_error_string/code/class (MPI-4.1's MPI_Remove_error_*): a string
         * goes and the code stays; a class with codes cannot go; removed numbers come back, so
         * adding and removing in a loop never runs out (more rounds than there are classes). */
        CHECK_MPI(MPIX_Delete_error_string(ucode));
        CHECK_MPI(MPI_Error_string(ucode, s, &len));
        CHECK_MSG(len == 0, "string of a code whose string was removed: %s", s);
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        CHECK(MPIX_Delete_error_class(uclass) != MPI_SUCCESS);
        CHECK(MPIX_Delete_error_code(MPI_ERR_TRUNCATE) != MPI_SUCCESS);
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
        CHECK_MPI(MPIX_Delete_error_code(ucode));
        CHECK_MPI(MPIX_Delete_error_code(ucode2));
        CHECK_MPI(MPIX_Delete_error_class(uclass));
        for (i = 0; i < 5000; i++) {
            int cl, k;
            CHECK_MPI(MPI_Add_error_class(&cl));
            CHECK_MPI(MPI_Add_error_code(cl, &k));
            CHECK_MPI(MPI_Add_error_string(k, "protean test: round"));
            CHECK_MPI(MPI_Error_class(k, &j));
            CHECK_EQ(j, cl);
            CHECK_MPI(MPIX_Delete_error_code(k));
            CHECK_MPI(MPIX_Delete_error_class(cl));
        }
    }
#endif
    return tu_finish();
}
