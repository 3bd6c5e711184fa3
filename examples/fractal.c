/*
 * A master that spawns workers to render the Mandelbrot set in tiles, then writes a PNG.
 *
 *   mpirun -n 1 fractal [-w WORKERS] [-s WIDTHxHEIGHT] [-t TILE] [-i ITERATIONS] [-o FILE]
 *                       [--check]
 *
 * The master (a job of one process) starts WORKERS copies of this program with
 * MPI_Comm_spawn and hands out tiles one at a time over the intercommunicator: a worker that
 * returns a tile gets the next one, so the slow tiles near the set's edge do not hold the
 * others up. When every tile is in, the master tells each worker to stop, both sides call
 * MPI_Comm_disconnect, and the master writes the image (an uncompressed PNG: stored deflate
 * blocks, so no zlib is needed). --check also renders the image in the master alone and
 * compares it byte for byte with the one the workers made; the exit status says whether they
 * agree.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_WORK = 1, TAG_STOP = 2, TAG_TILE = 3 };

struct view {
    int width, height, tile, iterations;
    double cx, cy, span; /* centre and horizontal extent in the complex plane */
};

static int tiles_across(const struct view *v) { return (v->width + v->tile - 1) / v->tile; }
static int tiles_total(const struct view *v)
{
    return tiles_across(v) * ((v->height + v->tile - 1) / v->tile);
}

/* Tile t's rectangle: left, top, width, height (the last row and column may be narrower). */
static void tile_rect(const struct view *v, int t, int *x0, int *y0, int *w, int *h)
{
    *x0 = t % tiles_across(v) * v->tile;
    *y0 = t / tiles_across(v) * v->tile;
    *w = v->width - *x0 < v->tile ? v->width - *x0 : v->tile;
    *h = v->height - *y0 < v->tile ? v->height - *y0 : v->tile;
}

/* One pixel: black inside the set, outside a colour from the smoothed escape count. */
static void shade(const struct view *v, int x, int y, unsigned char *rgb)
{
    double scale = v->span / v->width;
    double cr = v->cx + (x - v->width / 2.0) * scale, ci = v->cy - (y - v->height / 2.0) * scale;
    double zr = 0, zi = 0, r2 = 0;
    int n;
    for (n = 0; n < v->iterations && r2 <= 256.0; n++) {
        double t = zr * zr - zi * zi + cr;
        zi = 2 * zr * zi + ci;
        zr = t;
        r2 = zr * zr + zi * zi;
    }
    if (n == v->iterations) {
        rgb[0] = rgb[1] = rgb[2] = 0;
        return;
    }
    double mu = n + 1 - log(log(sqrt(r2))) / log(2.0), s = 0.045 * mu;
    static const double phase[3] = {0.0, 0.15, 0.30};
    for (int c = 0; c < 3; c++)
        rgb[c] = (unsigned char)(255 * (0.5 + 0.5 * cos(6.283185307179586 * (s + phase[c]))));
}

/* Tile t into out (w*h*3 bytes, rows of the tile one after another). */
static void render_tile(const struct view *v, int t, unsigned char *out)
{
    int x0, y0, w, h;
    tile_rect(v, t, &x0, &y0, &w, &h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            shade(v, x0 + x, y0 + y, out + 3 * (y * w + x));
}

static void place_tile(const struct view *v, int t, const unsigned char *pixels,
                       unsigned char *image)
{
    int x0, y0, w, h;
    tile_rect(v, t, &x0, &y0, &w, &h);
    for (int y = 0; y < h; y++)
        memcpy(image + 3 * ((size_t)(y0 + y) * v->width + x0), pixels + 3 * y * w, 3 * (size_t)w);
}

/* --- PNG, uncompressed ------------------------------------------------------------------ */

static uint32_t crc_table[256];

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
    if (!crc_table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            crc_table[i] = c;
        }
    crc = ~crc;
    while (n--)
        crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void put32(unsigned char *p, uint32_t x)
{
    p[0] = x >> 24, p[1] = x >> 16, p[2] = x >> 8, p[3] = x;
}

static int write_chunk(FILE *f, const char *type, const unsigned char *data, size_t n)
{
    unsigned char b[4];
    uint32_t crc = crc32_update(0, (const unsigned char *)type, 4);
    crc = crc32_update(crc, data, n);
    put32(b, (uint32_t)n);
    if (fwrite(b, 1, 4, f) != 4 || fwrite(type, 1, 4, f) != 4 || fwrite(data, 1, n, f) != n)
        return -1;
    put32(b, crc);
    return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

static int write_png(const char *path, const unsigned char *rgb, int width, int height)
{
    /* The zlib stream: the filter byte 0 before each row, cut into stored blocks of at most
     * 65535 bytes, then the Adler-32 of the uncompressed bytes. */
    size_t row = 3 * (size_t)width + 1, raw_len = row * height;
    size_t nblocks = (raw_len + 65534) / 65535, len = 2 + raw_len + 5 * nblocks + 4;
    unsigned char *raw = malloc(raw_len), *z = malloc(len), *p = z, ihdr[13];
    FILE *f;
    int rc = -1;
    if (!raw || !z)
        goto out;
    for (int y = 0; y < height; y++) {
        raw[y * row] = 0;
        memcpy(raw + y * row + 1, rgb + (size_t)y * 3 * width, 3 * (size_t)width);
    }
    *p++ = 0x78, *p++ = 0x01;
    uint32_t a = 1, b = 0;
    for (size_t off = 0; off < raw_len; off += 65535) {
        size_t n = raw_len - off < 65535 ? raw_len - off : 65535;
        *p++ = off + n == raw_len; /* BFINAL on the last block, BTYPE 00 (stored) */
        *p++ = n & 0xff, *p++ = n >> 8, *p++ = ~n & 0xff, *p++ = (~n >> 8) & 0xff;
        memcpy(p, raw + off, n);
        p += n;
    }
    for (size_t i = 0; i < raw_len; i++) {
        a = (a + raw[i]) % 65521;
        b = (b + a) % 65521;
    }
    put32(p, b << 16 | a);
    p += 4;
    put32(ihdr, width);
    put32(ihdr + 4, height);
    ihdr[8] = 8, ihdr[9] = 2, ihdr[10] = ihdr[11] = ihdr[12] = 0; /* 8-bit RGB */
    if (!(f = fopen(path, "wb")))
        goto out;
    rc = fwrite("\x89PNG\r\n\x1a\n", 1, 8, f) == 8 && write_chunk(f, "IHDR", ihdr, 13) == 0 &&
                 write_chunk(f, "IDAT", z, (size_t)(p - z)) == 0 &&
                 write_chunk(f, "IEND", NULL, 0) == 0
             ? 0
             : -1;
    if (fclose(f) != 0)
        rc = -1;
out:
    free(raw);
    free(z);
    return rc;
}

/* --- the two roles ---------------------------------------------------------------------- */

static int worker(MPI_Comm parent)
{
    struct view v;
    MPI_Bcast(&v, sizeof v, MPI_BYTE, 0, parent);
    unsigned char *buf = malloc(sizeof(int) + 3 * (size_t)v.tile * v.tile);
    for (;;) {
        MPI_Status st;
        int t;
        MPI_Recv(&t, 1, MPI_INT, 0, MPI_ANY_TAG, parent, &st);
        if (st.MPI_TAG == TAG_STOP)
            break;
        int x0, y0, w, h;
        tile_rect(&v, t, &x0, &y0, &w, &h);
        memcpy(buf, &t, sizeof t);
        render_tile(&v, t, buf + sizeof t);
        MPI_Send(buf, (int)(sizeof t + 3 * (size_t)w * h), MPI_BYTE, 0, TAG_TILE, parent);
    }
    free(buf);
    MPI_Comm_disconnect(&parent);
    return 0;
}

static int usage(const char *prog)
{
    fprintf(stderr,
            "usage: mpirun -n 1 %s [-w WORKERS] [-s WIDTHxHEIGHT] [-t TILE] [-i ITERATIONS]"
            " [-o FILE] [--check]\n",
            prog);
    return 2;
}

static int master(int argc, char **argv)
{
    struct view v = {1024, 768, 64, 1500, -0.7453, 0.1127, 0.0065};
    int nworkers = 4, check = 0;
    const char *out = "fractal.png";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--check") == 0)
            check = 1;
        else if (!val)
            return usage(argv[0]);
        else if (strcmp(a, "-w") == 0)
            nworkers = atoi(val), i++;
        else if (strcmp(a, "-s") == 0 && sscanf(val, "%dx%d", &v.width, &v.height) == 2)
            i++;
        else if (strcmp(a, "-t") == 0)
            v.tile = atoi(val), i++;
        else if (strcmp(a, "-i") == 0)
            v.iterations = atoi(val), i++;
        else if (strcmp(a, "-o") == 0)
            out = val, i++;
        else
            return usage(argv[0]);
    }
    if (nworkers < 1 || v.width < 1 || v.height < 1 || v.tile < 1 || v.iterations < 1)
        return usage(argv[0]);

    double t0 = MPI_Wtime();
    char *wargs[] = {"--worker", NULL};
    int *errcodes = malloc(nworkers * sizeof(int));
    MPI_Comm workers;
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_spawn(argv[0], wargs, nworkers, MPI_INFO_NULL, 0, MPI_COMM_SELF, &workers,
                            errcodes);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "fractal: cannot spawn %d workers: %s\n", nworkers, msg);
        return 1;
    }
    free(errcodes);
    double t_spawned = MPI_Wtime();

    int ntiles = tiles_total(&v), next = 0, done = 0;
    unsigned char *image = malloc(3 * (size_t)v.width * v.height);
    unsigned char *buf = malloc(sizeof(int) + 3 * (size_t)v.tile * v.tile);
    int *per_worker = calloc(nworkers, sizeof(int));
    char *seen = calloc(ntiles, 1);
    MPI_Bcast(&v, sizeof v, MPI_BYTE, MPI_ROOT, workers);
    /* One tile to each worker, then the next to whoever returns one. */
    for (int w = 0; w < nworkers; w++) {
        if (next < ntiles)
            MPI_Send(&next, 1, MPI_INT, w, TAG_WORK, workers), next++;
        else
            MPI_Send(&next, 1, MPI_INT, w, TAG_STOP, workers);
    }
    while (done < ntiles) {
        MPI_Status st;
        int t;
        MPI_Recv(buf, (int)(sizeof(int) + 3 * (size_t)v.tile * v.tile), MPI_BYTE, MPI_ANY_SOURCE,
                 TAG_TILE, workers, &st);
        memcpy(&t, buf, sizeof t);
        if (t < 0 || t >= ntiles || seen[t]) {
            fprintf(stderr, "fractal: worker %d returned tile %d twice or out of range\n",
                    st.MPI_SOURCE, t);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        seen[t] = 1;
        place_tile(&v, t, buf + sizeof t, image);
        per_worker[st.MPI_SOURCE]++;
        done++;
        if (next < ntiles)
            MPI_Send(&next, 1, MPI_INT, st.MPI_SOURCE, TAG_WORK, workers), next++;
        else
            MPI_Send(&next, 1, MPI_INT, st.MPI_SOURCE, TAG_STOP, workers);
    }
    MPI_Comm_disconnect(&workers);
    double t_rendered = MPI_Wtime();

    printf("%dx%d, %d tiles of %d px, %d iterations: spawn %.1f ms, render %.1f ms\n", v.width,
           v.height, ntiles, v.tile, v.iterations, 1e3 * (t_spawned - t0),
           1e3 * (t_rendered - t_spawned));
    for (int w = 0; w < nworkers; w++)
        printf("  worker %d: %d tiles\n", w, per_worker[w]);
    int status = 0;
    if (write_png(out, image, v.width, v.height) != 0) {
        perror(out);
        status = 1;
    } else
        printf("wrote %s\n", out);
    if (check) {
        unsigned char *alone = malloc(3 * (size_t)v.width * v.height);
        double t1 = MPI_Wtime();
        for (int t = 0; t < ntiles; t++) {
            render_tile(&v, t, buf + sizeof(int));
            place_tile(&v, t, buf + sizeof(int), alone);
        }
        int same = memcmp(alone, image, 3 * (size_t)v.width * v.height) == 0;
        printf("check: the master alone took %.1f ms; the images %s\n", 1e3 * (MPI_Wtime() - t1),
               same ? "agree" : "DIFFER");
        status |= !same;
        if (!status)
            printf(" No Errors\n"); /* what MPI test suites (and tests/run) look for */
        free(alone);
    }
    free(image);
    free(buf);
    free(per_worker);
    free(seen);
    return status;
}

int main(int argc, char **argv)
{
    MPI_Comm parent;
    int rc;
    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        rc = worker(parent);
    else {
        int size;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (size != 1) {
            fprintf(stderr, "fractal: run it as one process (mpirun -n 1); it spawns its "
                            "workers\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        rc = master(argc, argv);
    }
    MPI_Finalize();
    return rc;
}
