/* tunex's timing harness for C kernels: one file, linked with a kernel's rendered source.
 *
 *   harness IN OUT REPEATS WARMUP FLUSH_KB
 *
 * IN holds the problem and the inputs (written by tunex.targets._c.write_inputs):
 *   "TXIN0001", int64 ndims, int64 dims[ndims], int64 nbufs,
 *   nbufs x (int64 elements, int64 is_output), then the float32 data of every input buffer.
 * The harness calls tx_kernel WARMUP times untimed, then REPEATS times, each timed with
 * CLOCK_MONOTONIC and printed as "tx_ns <nanoseconds>"; before every timed call it writes a
 * FLUSH_KB buffer so the caches hold none of the kernel's data (0: no flush). It then writes
 * the float32 data of every output buffer to OUT. Outputs are filled with NaN first, so an
 * element the kernel never writes fails the check.
 *
 * Under the cycle model (riscv-sim) it runs REPEATS=1 WARMUP=0 FLUSH_KB=0: the executed
 * blocks of tx_* functions are those of exactly one call.
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void tx_kernel(float *const *buf, const long *dim);

static void die(const char *what) {
    fprintf(stderr, "tx_error %s\n", what);
    exit(2);
}

static int64_t read_i64(FILE *f) {
    int64_t v;
    if (fread(&v, sizeof v, 1, f) != 1) die("truncated input file");
    return v;
}

static volatile unsigned char sink;

int main(int argc, char **argv) {
    if (argc != 6) die("usage: harness IN OUT REPEATS WARMUP FLUSH_KB");
    long repeats = atol(argv[3]), warmup = atol(argv[4]), flush_kb = atol(argv[5]);
    FILE *in = fopen(argv[1], "rb");
    if (!in) die("cannot open input file");
    char magic[8];
    if (fread(magic, 1, 8, in) != 8 || memcmp(magic, "TXIN0001", 8) != 0) die("bad magic");
    int64_t ndims = read_i64(in);
    if (ndims < 0 || ndims > 16) die("bad ndims");
    long dim[16];
    for (int64_t i = 0; i < ndims; i++) dim[i] = (long)read_i64(in);
    int64_t nbufs = read_i64(in);
    if (nbufs <= 0 || nbufs > 16) die("bad nbufs");
    float *buf[16];
    int64_t count[16], is_out[16];
    for (int64_t b = 0; b < nbufs; b++) {
        count[b] = read_i64(in);
        is_out[b] = read_i64(in);
        if (count[b] < 0) die("bad buffer size");
        size_t bytes = ((size_t)count[b] * sizeof(float) + 63) / 64 * 64 + 64;
        buf[b] = aligned_alloc(64, bytes);
        if (!buf[b]) die("out of memory");
    }
    for (int64_t b = 0; b < nbufs; b++) {
        if (is_out[b]) {
            for (int64_t i = 0; i < count[b]; i++) buf[b][i] = NAN;
        } else if (fread(buf[b], sizeof(float), (size_t)count[b], in) != (size_t)count[b]) {
            die("truncated input data");
        }
    }
    fclose(in);

    unsigned char *flush = NULL;
    if (flush_kb > 0) {
        flush = malloc((size_t)flush_kb * 1024);
        if (!flush) die("out of memory for the cache flush");
    }
    for (long r = 0; r < warmup; r++) tx_kernel(buf, dim);
    for (long r = 0; r < repeats; r++) {
        if (flush) {
            memset(flush, (int)r, (size_t)flush_kb * 1024);
            sink = flush[(size_t)r % ((size_t)flush_kb * 1024)];
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        tx_kernel(buf, dim);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long long ns = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
        printf("tx_ns %lld\n", ns);
    }
    FILE *out = fopen(argv[2], "wb");
    if (!out) die("cannot open output file");
    for (int64_t b = 0; b < nbufs; b++) {
        if (is_out[b] && fwrite(buf[b], sizeof(float), (size_t)count[b], out) != (size_t)count[b])
            die("cannot write output file");
    }
    fclose(out);
    printf("tx_done\n");
    return 0;
}
