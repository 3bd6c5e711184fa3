/*
 * Attribute caching on communicators and datatypes: keyvals with copy and delete callbacks.
 * MPI_Comm_dup calls the copy callback of every attribute (MPI_COMM_DUP_FN copies the value,
 * MPI_COMM_NULL_COPY_FN does not, a callback that sets flag 0 does not, one that sets a new
 * value gives the copy that value); MPI_Comm_free calls the delete callback of every
 * attribute; setting an attribute again calls the delete callback on the old value; delete_attr
 * calls it; a keyval freed while attributes use it stays valid for them (their delete callback
 * still runs) and the variable holding it becomes MPI_KEYVAL_INVALID; a copy callback that fails makes the
 * dup fail; get_attr of an unset keyval gives flag 0; the MPI-1 names (Keyval_create, Attr_put,
 * Attr_get, Attr_delete); predefined attributes are visible on a dup and cannot be set;
 * datatype attributes follow MPI_Type_dup and are deleted by MPI_Type_free. A keyval freed while
 * attributes use it still serves them, through the handle saved before the free, for
 * communicators, datatypes and windows: get, replace (the delete callback on the old value),
 * copy on dup, delete_attr, the delete callbacks when the object is freed; no new attribute
 * takes it (MPI_ERR_KEYVAL). A keyval of another kind of object is MPI_ERR_KEYVAL, raised on
 * the object the call names (a window's own handler for the window calls). Any number of
 * processes.
 */
#include "util.h"

static int deleted[16], copied[16];
static int extra_seen = 0;

static int copy_cb(MPI_Comm oldcomm, int keyval, void *extra, void *in, void *out, int *flag)
{
    intptr_t v = (intptr_t)in;
    (void)oldcomm;
    (void)keyval;
    if (extra != (void *)&extra_seen)
        return MPI_ERR_OTHER;
    copied[v % 16]++;
    *(void **)out = (void *)(v + 100); /* the copy gets value + 100 */
    *flag = 1;
    return MPI_SUCCESS;
}

static int nocopy_cb(MPI_Comm oldcomm, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)oldcomm;
    (void)keyval;
    (void)extra;
    (void)in;
    (void)out;
    *flag = 0;
    return MPI_SUCCESS;
}

static int failcopy_cb(MPI_Comm oldcomm, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)oldcomm;
    (void)keyval;
    (void)extra;
    (void)in;
    (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}

static int delete_cb(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    deleted[(intptr_t)value % 16]++;
    return MPI_SUCCESS;
}

static int type_copy_cb(MPI_Datatype t, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)t;
    (void)keyval;
    (void)extra;
    copied[(intptr_t)in % 16]++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int type_delete_cb(MPI_Datatype t, int keyval, void *value, void *extra)
{
    (void)t;
    (void)keyval;
    (void)extra;
    deleted[(intptr_t)value % 16]++;
    return MPI_SUCCESS;
}

static int win_delete_cb(MPI_Win w, int keyval, void *value, void *extra)
{
    (void)w;
    (void)keyval;
    (void)extra;
    deleted[(intptr_t)value % 16]++;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    int k1, k2, k3, k4, kf, flag, rc;
    void *v;
    MPI_Comm d, d2;

    tu_init(&argc, &argv);

    CHECK_MPI(MPI_Comm_create_keyval(copy_cb, delete_cb, &k1, &extra_seen));
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, delete_cb, &k2, NULL));
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cb, &k3, NULL));
    CHECK_MPI(MPI_Comm_create_keyval(nocopy_cb, MPI_COMM_NULL_DELETE_FN, &k4, NULL));
    CHECK(k1 != MPI_KEYVAL_INVALID && k1 != k2 && k2 != k3 && k3 != k4);

    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    CHECK_MPI(MPI_Comm_get_attr(d, k1, &v, &flag));
    CHECK_EQ(flag, 0);
    CHECK_MPI(MPI_Comm_set_attr(d, k1, (void *)(intptr_t)1));
    CHECK_MPI(MPI_Comm_set_attr(d, k2, (void *)(intptr_t)2));
    CHECK_MPI(MPI_Comm_set_attr(d, k3, (void *)(intptr_t)3));
    CHECK_MPI(MPI_Comm_set_attr(d, k4, (void *)(intptr_t)4));
    CHECK_MPI(MPI_Comm_get_attr(d, k2, &v, &flag));
    CHECK_EQ(flag, 1);
    CHECK_EQ((int)(intptr_t)v, 2);

    /* Setting again deletes the old value. */
    CHECK_MPI(MPI_Comm_set_attr(d, k3, (void *)(intptr_t)6));
    CHECK_EQ(deleted[3], 1);

    /* dup: k1 copied as value+100 (101), k2 copied as is, k3 and k4 not copied. */
    CHECK_MPI(MPI_Comm_dup(d, &d2));
    CHECK_EQ(copied[1], 1);
    CHECK_MPI(MPI_Comm_get_attr(d2, k1, &v, &flag));
    CHECK_EQ(flag, 1);
    CHECK_EQ((int)(intptr_t)v, 101);
    CHECK_MPI(MPI_Comm_get_attr(d2, k2, &v, &flag));
    CHECK_EQ(flag, 1);
    CHECK_EQ((int)(intptr_t)v, 2);
    CHECK_MPI(MPI_Comm_get_attr(d2, k3, &v, &flag));
    CHECK_EQ(flag, 0);
    CHECK_MPI(MPI_Comm_get_attr(d2, k4, &v, &flag));
    CHECK_EQ(flag, 0);
    /* Predefined attributes on a dup. */
    {
        int *ub;
        CHECK_MPI(MPI_Comm_get_attr(d2, MPI_TAG_UB, &ub, &flag));
        CHECK_EQ(flag, 1);
        CHECK_INT(*ub, >=, 32767);
    }

    /* delete_attr calls the delete callback. */
    CHECK_MPI(MPI_Comm_delete_attr(d, k2));
    CHECK_EQ(deleted[2], 1);
    CHECK_MPI(MPI_Comm_get_attr(d, k2, &v, &flag));
    CHECK_EQ(flag, 0);

    /* Freeing the keyval while d and d2 still use it. */
    kf = k1;
    CHECK_MPI(MPI_Comm_free_keyval(&kf));
    CHECK_EQ(kf, MPI_KEYVAL_INVALID);

    /* free: delete callbacks of the remaining attributes. d has k1 (1), k3 (6); k4 has the
     * null delete function. d2 has k1 (101 -> slot 5) and k2 (2). */
    CHECK_MPI(MPI_Comm_free(&d));
    CHECK_EQ(deleted[1], 1);
    CHECK_EQ(deleted[6], 1);
    CHECK_MPI(MPI_Comm_free(&d2));
    CHECK_EQ(deleted[101 % 16], 1);
    CHECK_EQ(deleted[2], 2);

    /* A copy callback that fails makes the dup fail. */
    {
        int kx;
        MPI_Comm dd, d3;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dd));
        CHECK_MPI(MPI_Comm_set_errhandler(dd, MPI_ERRORS_RETURN));
        CHECK_MPI(MPI_Comm_create_keyval(failcopy_cb, MPI_COMM_NULL_DELETE_FN, &kx, NULL));
        CHECK_MPI(MPI_Comm_set_attr(dd, kx, (void *)(intptr_t)9));
        d3 = MPI_COMM_WORLD;
        rc = MPI_Comm_dup(dd, &d3);
        CHECK(rc != MPI_SUCCESS);
        CHECK(d3 == MPI_COMM_NULL);
        CHECK_MPI(MPI_Comm_delete_attr(dd, kx));
        CHECK_MPI(MPI_Comm_free_keyval(&kx));
        CHECK_MPI(MPI_Comm_free(&dd));
    }

    /* Predefined attributes cannot be set or deleted; invalid keyvals are errors. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    rc = MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, (void *)(intptr_t)7);
    CHECK(rc != MPI_SUCCESS);
    rc = MPI_Comm_delete_attr(MPI_COMM_WORLD, MPI_TAG_UB);
    CHECK(rc != MPI_SUCCESS);
    rc = MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID, NULL);
    CHECK(rc != MPI_SUCCESS); /* MPI_ERR_KEYVAL here and in MPICH, MPI_ERR_OTHER in Open MPI */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    /* MPI-1 names. */
    {
        int k, *p, val = 42;
        MPI_Comm dd;
        CHECK_MPI(MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &k, NULL));
        CHECK_MPI(MPI_Attr_put(MPI_COMM_WORLD, k, &val));
        CHECK_MPI(MPI_Attr_get(MPI_COMM_WORLD, k, &p, &flag));
        CHECK_EQ(flag, 1);
        CHECK(p == &val);
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dd));
        CHECK_MPI(MPI_Attr_get(dd, k, &p, &flag));
        CHECK_EQ(flag, 1);
        CHECK_EQ(*p, 42);
        CHECK_MPI(MPI_Comm_free(&dd));
        CHECK_MPI(MPI_Attr_delete(MPI_COMM_WORLD, k));
        CHECK_MPI(MPI_Keyval_free(&k));
        CHECK_EQ(k, MPI_KEYVAL_INVALID);
    }

    /* Datatype attributes. */
    {
        int tk;
        MPI_Datatype t, t2;
        memset(deleted, 0, sizeof deleted);
        memset(copied, 0, sizeof copied);
        CHECK_MPI(MPI_Type_create_keyval(type_copy_cb, type_delete_cb, &tk, NULL));
        CHECK_MPI(MPI_Type_contiguous(3, MPI_INT, &t));
        CHECK_MPI(MPI_Type_set_attr(t, tk, (void *)(intptr_t)7));
        CHECK_MPI(MPI_Type_dup(t, &t2));
        CHECK_EQ(copied[7], 1);
        CHECK_MPI(MPI_Type_get_attr(t2, tk, &v, &flag));
        CHECK_EQ(flag, 1);
        CHECK_EQ((int)(intptr_t)v, 7);
        CHECK_MPI(MPI_Type_free(&t));
        if (!tu_quirk("type_free_deferred"))
            CHECK_EQ(deleted[7], 1);
        CHECK_MPI(MPI_Type_delete_attr(t2, tk));
        if (!tu_quirk("type_free_deferred"))
            CHECK_EQ(deleted[7], 2);
        CHECK_MPI(MPI_Type_get_attr(t2, tk, &v, &flag));
        CHECK_EQ(flag, 0);
        CHECK_MPI(MPI_Type_free(&t2));
        CHECK_EQ(deleted[7], 2);
        CHECK_MPI(MPI_Type_free_keyval(&tk));
    }

    /* Freed keyvals still serve the attributes that use them. */
    {
        int ck, saved, tk, tsaved, wk, wsaved, buf = 0;
        MPI_Comm c1, c2;
        MPI_Datatype t, t2;
        MPI_Win w;
        memset(deleted, 0, sizeof deleted);
        memset(copied, 0, sizeof copied);
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

        /* Communicators. */
        CHECK_MPI(MPI_Comm_create_keyval(copy_cb, delete_cb, &ck, &extra_seen));
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c1));
        CHECK_MPI(MPI_Comm_set_attr(c1, ck, (void *)(intptr_t)3));
        saved = ck;
        CHECK_MPI(MPI_Comm_free_keyval(&ck));
        CHECK_EQ(ck, MPI_KEYVAL_INVALID);
        CHECK_MPI(MPI_Comm_get_attr(c1, saved, &v, &flag));
        CHECK_EQ(flag, 1);
        CHECK_EQ((int)(intptr_t)v, 3);
        CHECK_MPI(MPI_Comm_dup(c1, &c2)); /* copied as 103 */
        CHECK_EQ(copied[3], 1);
        CHECK_MPI(MPI_Comm_get_attr(c2, saved, &v, &flag));
        CHECK_EQ(flag, 1);
        CHECK_EQ((int)(intptr_t)v, 103);
        CHECK_MPI(MPI_Comm_delete_attr(c1, saved));
        CHECK_EQ(deleted[3], 1);
        CHECK_MPI(MPI_Comm_get_attr(c1, saved, &v, &flag));
        CHECK_EQ(flag, 0);
        rc = MPI_Comm_set_attr(c1, saved, (void *)(intptr_t)5); /* a new attribute: refused */
        CHECK_CLASS(rc, MPI_ERR_KEYVAL);
        CHECK_MPI(MPI_Comm_set_attr(c2, saved, (void *)(intptr_t)4)); /* replaces 103 */
        CHECK_EQ(deleted[103 % 16], 1);
        CHECK_MPI(MPI_Comm_free(&c2));
        CHECK_EQ(deleted[4], 1);
        CHECK_MPI(MPI_Comm_free(&c1));

        /* Datatypes. */
        CHECK_MPI(MPI_Type_create_keyval(type_copy_cb, type_delete_cb, &tk, NULL));
        CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &t));
        CHECK_MPI(MPI_Type_set_attr(t, tk, (void *)(intptr_t)8));
        tsaved = tk;
        CHECK_MPI(MPI_Type_free_keyval(&tk));
        CHECK_EQ(tk, MPI_KEYVAL_INVALID);
        CHECK_MPI(MPI_Type_dup(t, &t2));
        CHECK_EQ(copied[8], 1);
        CHECK_MPI(MPI_Type_get_attr(t2, tsaved, &v, &flag));
        CHECK_EQ(flag, 1);
        CHECK_EQ((int)(intptr_t)v, 8);
        CHECK_MPI(MPI_Type_delete_attr(t, tsaved));
        CHECK_EQ(deleted[8], 1);
        CHECK_MPI(MPI_Type_free(&t));
        CHECK_MPI(MPI_Type_free(&t2));
        CHECK_EQ(deleted[8], 2);

        /* Windows. */
        CHECK_MPI(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_delete_cb, &wk, NULL));
        CHECK_MPI(MPI_Win_create(&buf, sizeof buf, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w));
        CHECK_MPI(MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN));
        CHECK_MPI(MPI_Win_set_attr(w, wk, (void *)(intptr_t)9));
        wsaved = wk;
        CHECK_MPI(MPI_Win_free_keyval(&wk));
        CHECK_EQ(wk, MPI_KEYVAL_INVALID);
        CHECK_MPI(MPI_Win_get_attr(w, wsaved, &v, &flag));
        CHECK_EQ(flag, 1);
        CHECK_EQ((int)(intptr_t)v, 9);
        CHECK_MPI(MPI_Win_set_attr(w, wsaved, (void *)(intptr_t)10));
        CHECK_EQ(deleted[9], 1);
        CHECK_MPI(MPI_Win_delete_attr(w, wsaved));
        CHECK_EQ(deleted[10], 1);

        /* Keyvals of another kind: MPI_ERR_KEYVAL, on the handler of the object named (the
         * window's is MPI_ERRORS_RETURN, set above; windows start with MPI_ERRORS_ARE_FATAL). */
        CHECK_MPI(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &wk, NULL));
        CHECK_MPI(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &tk, NULL));
        CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &ck, NULL));
        rc = MPI_Comm_set_attr(MPI_COMM_WORLD, wk, &buf);
        CHECK_CLASS(rc, MPI_ERR_KEYVAL);
        rc = MPI_Comm_get_attr(MPI_COMM_WORLD, tk, &v, &flag);
        CHECK_CLASS(rc, MPI_ERR_KEYVAL);
        rc = MPI_Type_set_attr(MPI_INT, ck, &buf);
        CHECK_CLASS(rc, MPI_ERR_KEYVAL);
        rc = MPI_Win_set_attr(w, ck, &buf);
        CHECK_CLASS(rc, MPI_ERR_KEYVAL);
        rc = MPI_Win_get_attr(w, tk, &v, &flag);
        CHECK_CLASS(rc, MPI_ERR_KEYVAL);
        rc = MPI_Comm_free_keyval(&wk);
        CHECK_CLASS(rc, MPI_ERR_KEYVAL);
        CHECK(wk != MPI_KEYVAL_INVALID);
        CHECK_MPI(MPI_Win_free_keyval(&wk));
        CHECK_MPI(MPI_Type_free_keyval(&tk));
        CHECK_MPI(MPI_Comm_free_keyval(&ck));
        CHECK_MPI(MPI_Win_free(&w));
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }

    CHECK_MPI(MPI_Comm_free_keyval(&k2));
    CHECK_MPI(MPI_Comm_free_keyval(&k3));
    CHECK_MPI(MPI_Comm_free_keyval(&k4));
    return tu_finish();
}
