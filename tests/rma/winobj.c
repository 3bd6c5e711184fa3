/*
 * rma/winobj: windows as objects. The predefined attributes (MPI_WIN_BASE, MPI_WIN_SIZE,
 * MPI_WIN_DISP_UNIT, MPI_WIN_CREATE_FLAVOR, MPI_WIN_MODEL) of every flavor; user attributes
 * with a delete callback that runs at MPI_Win_delete_attr and at MPI_Win_free; names; info
 * (the hints set come back, MPI_Win_set_info adds); the group; error handlers (a user
 * handler gets the window and the code, MPI_Win_call_errhandler, MPI_ERRORS_RETURN);
 * argument errors: negative size, zero displacement unit, attaching to a window that is not
 * dynamic, an invalid window handle.
 */
#include "util.h"

static int deleted = 0;
static int del_fn(MPI_Win w, int k, void *val, void *extra)
{
    (void)w;
    (void)k;
    CHECK(extra == (void *)&deleted);
    deleted += *(int *)val;
    return MPI_SUCCESS;
}

static int handled = 0;
static MPI_Win handled_win;
static void errfn(MPI_Win *w, int *code, ...)
{
    int cls;
    MPI_Error_class(*code, &cls);
    handled_win = *w;
    handled = cls;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int rank = tu_rank, size = tu_size;
    char buf[100];
    MPI_Win win;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "no_locks", "false");
    MPI_Info_set(info, "accumulate_ordering", "rar,raw");
    MPI_Info_set(info, "protean_unknown_key", "v1"); /* an unknown hint is ignored */
    CHECK_MPI(MPI_Win_create(buf, 10 + rank, 1, info, MPI_COMM_WORLD, &win));
    MPI_Info_free(&info);

    /* Predefined attributes. */
    void *base;
    MPI_Aint *sz;
    int *du, *fl, *model, flag;
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    CHECK(flag && (base == buf || tu_quirk("win_base")));
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_SIZE, &sz, &flag));
    CHECK(flag && *sz == 10 + rank);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &du, &flag));
    CHECK(flag && *du == 1);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &fl, &flag));
    CHECK(flag && *fl == MPI_WIN_FLAVOR_CREATE);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && *model == MPI_WIN_UNIFIED);

    /* User attributes. */
    int key;
    CHECK_MPI(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, del_fn, &key, &deleted));
    static int one = 1, ten = 10;
    void *got;
    CHECK_MPI(MPI_Win_get_attr(win, key, &got, &flag));
    CHECK(!flag);
    CHECK_MPI(MPI_Win_set_attr(win, key, &one));
    CHECK_MPI(MPI_Win_get_attr(win, key, &got, &flag));
    CHECK(flag && got == &one);
    CHECK_MPI(MPI_Win_delete_attr(win, key));
    CHECK_EQ(deleted, 1);
    CHECK_MPI(MPI_Win_set_attr(win, key, &ten));

    /* Names. */
    int len;
    CHECK_MPI(MPI_Win_get_name(win, buf, &len));
    CHECK_EQ(len, 0);
    CHECK_MPI(MPI_Win_set_name(win, "my window"));
    char name[MPI_MAX_OBJECT_NAME];
    CHECK_MPI(MPI_Win_get_name(win, name, &len));
    CHECK(len == 9 && !strcmp(name, "my window"));

    /* Info. */
    MPI_Info used;
    char val[MPI_MAX_INFO_VAL];
    CHECK_MPI(MPI_Win_get_info(win, &used));
    CHECK_MPI(MPI_Info_get(used, "accumulate_ordering", MPI_MAX_INFO_VAL, val, &flag));
    CHECK(flag && !strcmp(val, "rar,raw"));
    CHECK_MPI(MPI_Info_get(used, "accumulate_ops", MPI_MAX_INFO_VAL, val, &flag));
    CHECK(flag && !strcmp(val, "same_op_no_op"));
    CHECK_MPI(MPI_Info_get(used, "protean_unknown_key", MPI_MAX_INFO_VAL, val, &flag));
    CHECK(!flag);
    MPI_Info_free(&used);
    MPI_Info_create(&info);
    MPI_Info_set(info, "accumulate_ordering", "none");
    CHECK_MPI(MPI_Win_set_info(win, info));
    MPI_Info_free(&info);
    CHECK_MPI(MPI_Win_get_info(win, &used));
    CHECK_MPI(MPI_Info_get(used, "accumulate_ordering", MPI_MAX_INFO_VAL, val, &flag));
    CHECK(flag && !strcmp(val, "none"));
    MPI_Info_free(&used);

    /* Group. */
    MPI_Group wg, cg;
    int cmp;
    CHECK_MPI(MPI_Win_get_group(win, &wg));
    MPI_Comm_group(MPI_COMM_WORLD, &cg);
    MPI_Group_compare(wg, cg, &cmp);
    CHECK_EQ(cmp, MPI_IDENT);
    MPI_Group_free(&wg);
    MPI_Group_free(&cg);

    /* Error handlers. */
    MPI_Errhandler eh, cur;
    CHECK_MPI(MPI_Win_get_errhandler(win, &cur));
    CHECK(cur == MPI_ERRORS_ARE_FATAL);
    CHECK_MPI(MPI_Win_create_errhandler(errfn, &eh));
    CHECK_MPI(MPI_Win_set_errhandler(win, eh));
    int rc = MPI_Win_lock(99, 0, 0, win);
    int lockcls = tu_quirk("arg_classes") ? MPI_ERR_ARG : MPI_ERR_LOCKTYPE;
    CHECK_EQ(handled, lockcls);
    CHECK(handled_win == win);
    CHECK_CLASS(rc, lockcls);
    handled = 0;
    CHECK_MPI(MPI_Win_call_errhandler(win, MPI_ERR_OTHER));
    CHECK_EQ(handled, MPI_ERR_OTHER);
    CHECK_MPI(MPI_Win_get_errhandler(win, &cur));
    CHECK(cur == eh);
    MPI_Errhandler_free(&cur);
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Errhandler_free(&eh);
    CHECK_CLASS(MPI_Win_attach(win, buf, 4), MPI_ERR_RMA_FLAVOR);
    CHECK_CLASS(MPI_Win_detach(win, buf), MPI_ERR_RMA_FLAVOR);

    /* Errors of creation go to the communicator. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Win bad;
    CHECK_CLASS(MPI_Win_create(buf, -1, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &bad), MPI_ERR_SIZE);
    CHECK_CLASS(MPI_Win_create(buf, 4, 0, MPI_INFO_NULL, MPI_COMM_WORLD, &bad), MPI_ERR_DISP);
    CHECK_CLASS(MPI_Win_create(buf, 4, 1, MPI_INFO_NULL, MPI_COMM_NULL, &bad), MPI_ERR_COMM);
    MPI_Win nullwin = MPI_WIN_NULL;
    CHECK_CLASS(MPI_Win_fence(0, MPI_WIN_NULL), MPI_ERR_WIN);
    CHECK_CLASS(MPI_Win_free(&nullwin), MPI_ERR_WIN);

    /* Freeing runs the delete callback. */
    CHECK_MPI(MPI_Win_free(&win));
    CHECK_EQ(deleted, 11);
    CHECK(win == MPI_WIN_NULL);
    CHECK_MPI(MPI_Win_free_keyval(&key));

    /* The other flavors' attributes. */
    int *p;
    CHECK_MPI(MPI_Win_allocate(40, 4, MPI_INFO_NULL, MPI_COMM_WORLD, &p, &win));
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    CHECK(flag && (base == p || tu_quirk("win_base")));
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &du, &flag));
    CHECK(*du == 4);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &fl, &flag));
    CHECK(*fl == MPI_WIN_FLAVOR_ALLOCATE);
    CHECK_MPI(MPI_Win_free(&win));
    CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    CHECK(flag && base == NULL);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_SIZE, &sz, &flag));
    CHECK(*sz == 0);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &fl, &flag));
    CHECK(*fl == MPI_WIN_FLAVOR_DYNAMIC);
    CHECK_MPI(MPI_Win_free(&win));
    (void)size;
    return tu_finish();
}
