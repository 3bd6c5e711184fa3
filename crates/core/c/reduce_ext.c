/*
 * Reduction kernels for the C types Rust has no arithmetic for: long double (x87 extended
 * precision in 16 bytes), long double _Complex, and _Float16 (MPIX_C_FLOAT16). Called from
 * crates/core/src/mpi/coll/op.rs; every kernel computes d[i] = a[i] op b[i] for n values and
 * tolerates d aliasing a or b (each value is loaded before it is stored). Buffers may be
 * unaligned, so values move through memcpy.
 *
 * op numbers: 0 max, 1 min, 2 sum, 3 prod (as in op.rs).
 */
#include <stddef.h>
#include <string.h>

#define KERNEL(NAME, T)                                                                        \
    void NAME(int op, const void *a, const void *b, void *d, size_t n)                        \
    {                                                                                          \
        const char *pa = a, *pb = b;                                                           \
        char *pd = d;                                                                          \
        for (size_t i = 0; i < n; i++) {                                                       \
            T x, y, r;                                                                         \
            memcpy(&x, pa + i * sizeof(T), sizeof(T));                                         \
            memcpy(&y, pb + i * sizeof(T), sizeof(T));                                         \
            switch (op) {                                                                      \
            case 0: r = x > y ? x : y; break;                                                  \
            case 1: r = x < y ? x : y; break;                                                  \
            case 2: r = x + y; break;                                                          \
            default: r = x * y; break;                                                         \
            }                                                                                  \
            memcpy(pd + i * sizeof(T), &r, sizeof(T));                                         \
        }                                                                                      \
    }

KERNEL(protean_reduce_long_double, long double)
KERNEL(protean_reduce_float16, _Float16)

/* Complex: sum and product only. */
void protean_reduce_long_double_complex(int op, const void *a, const void *b, void *d, size_t n)
{
    const char *pa = a, *pb = b;
    char *pd = d;
    for (size_t i = 0; i < n; i++) {
        long double _Complex x, y, r;
        memcpy(&x, pa + i * sizeof x, sizeof x);
        memcpy(&y, pb + i * sizeof y, sizeof y);
        r = op == 2 ? x + y : x * y;
        memcpy(pd + i * sizeof r, &r, sizeof r);
    }
}

/* MINLOC (op 1) / MAXLOC (op 0) on {long double value; int index} pairs, `stride` bytes apart,
 * the index `off` bytes into each pair. */
void protean_reduce_long_double_loc(int op, const void *a, const void *b, void *d, size_t n,
                                    size_t stride, size_t off)
{
    const char *pa = a, *pb = b;
    char *pd = d;
    for (size_t i = 0; i < n; i++) {
        long double x, y;
        int ix, iy;
        memcpy(&x, pa + i * stride, sizeof x);
        memcpy(&y, pb + i * stride, sizeof y);
        memcpy(&ix, pa + i * stride + off, sizeof ix);
        memcpy(&iy, pb + i * stride + off, sizeof iy);
        int take_b = op == 1 ? y < x : y > x;
        if (x == y)
            ix = ix < iy ? ix : iy;
        else if (take_b) {
            x = y;
            ix = iy;
        }
        memcpy(pd + i * stride, &x, sizeof x);
        memcpy(pd + i * stride + off, &ix, sizeof ix);
    }
}
