/*
 * txbb: a QEMU TCG plugin (plugin API version 1, QEMU 7.2) that counts how often each
 * translation block runs. tunex's riscv-sim target multiplies these counts by a cycle model of
 * each block (tunex/targets/riscv/_cycles.py).
 *
 * Arguments (comma-separated after the plugin path, as QEMU passes them):
 *   outfile=PATH   where to write the counts at exit (required; PATH must not contain a comma)
 *   lo=0xADDR      count only blocks whose first instruction is at or above ADDR
 *   hi=0xADDR      ... and below ADDR
 *
 * Output: one line per block that ran at least once, "0x<vaddr> <ninsns> <count>", sorted by
 * vaddr then ninsns. A block translated again (after a flush, or a retranslation of the same
 * code) keeps its counter: blocks are keyed by (vaddr, ninsns), so counts of the same code add
 * up, while a block of a different length starting at the same address stays a separate line.
 *
 * The counter is bumped by an inline add that QEMU emits into the translated code (no callback
 * per execution). Inline adds are not atomic: with several guest threads running at once the
 * counts can lose increments, which tunex's single-threaded kernels never do.
 *
 * Own code of the tunex project; needs only qemu-plugin.h (no glib).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

typedef struct {
    uint64_t vaddr;
    uint64_t ninsns;
    uint64_t count; /* target of the inline add: its address never changes */
} Block;

/* Blocks live in fixed chunks (so the inline add's pointer stays valid); the hash table holds
 * pointers to them and is the only thing that grows by reallocation. */
#define CHUNK 4096
static Block **chunks;
static size_t nchunks, nblocks;
static Block **table;
static size_t table_cap; /* a power of two */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static char *outfile;
static uint64_t lo, hi = UINT64_MAX;

static uint64_t hash(uint64_t vaddr, uint64_t ninsns)
{
    uint64_t h = vaddr * 0x9E3779B97F4A7C15ull ^ (ninsns + 0x632BE59BD9B4E019ull);
    return h ^ (h >> 29);
}

static int table_insert(Block **tab, size_t cap, Block *b)
{
    size_t i = hash(b->vaddr, b->ninsns) & (cap - 1);
    while (tab[i] != NULL) {
        i = (i + 1) & (cap - 1);
    }
    tab[i] = b;
    return 0;
}

static int grow(void)
{
    size_t cap = table_cap ? table_cap * 2 : 1024;
    Block **tab = calloc(cap, sizeof(*tab));
    if (tab == NULL) {
        return -1;
    }
    for (size_t i = 0; i < table_cap; i++) {
        if (table[i] != NULL) {
            table_insert(tab, cap, table[i]);
        }
    }
    free(table);
    table = tab;
    table_cap = cap;
    return 0;
}

/* The block for (vaddr, ninsns), created on first sight; NULL only when out of memory. */
static Block *lookup(uint64_t vaddr, uint64_t ninsns)
{
    if (table_cap == 0 || (nblocks + 1) * 2 > table_cap) {
        if (grow() != 0) {
            return NULL;
        }
    }
    size_t i = hash(vaddr, ninsns) & (table_cap - 1);
    while (table[i] != NULL) {
        if (table[i]->vaddr == vaddr && table[i]->ninsns == ninsns) {
            return table[i];
        }
        i = (i + 1) & (table_cap - 1);
    }
    if (nblocks % CHUNK == 0) {
        Block **cs = realloc(chunks, (nchunks + 1) * sizeof(*cs));
        if (cs == NULL) {
            return NULL;
        }
        chunks = cs;
        chunks[nchunks] = calloc(CHUNK, sizeof(Block));
        if (chunks[nchunks] == NULL) {
            return NULL;
        }
        nchunks++;
    }
    Block *b = &chunks[nblocks / CHUNK][nblocks % CHUNK];
    nblocks++;
    b->vaddr = vaddr;
    b->ninsns = ninsns;
    b->count = 0;
    table[i] = b;
    return b;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
    if (vaddr < lo || vaddr >= hi) {
        return;
    }
    pthread_mutex_lock(&lock);
    Block *b = lookup(vaddr, qemu_plugin_tb_n_insns(tb));
    pthread_mutex_unlock(&lock);
    if (b != NULL) {
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->count, 1);
    }
}

static int by_address(const void *a, const void *b)
{
    const Block *x = *(Block *const *)a, *y = *(Block *const *)b;
    if (x->vaddr != y->vaddr) {
        return x->vaddr < y->vaddr ? -1 : 1;
    }
    return (x->ninsns > y->ninsns) - (x->ninsns < y->ninsns);
}

static void write_counts(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    pthread_mutex_lock(&lock);
    Block **all = malloc((nblocks ? nblocks : 1) * sizeof(*all));
    FILE *f = fopen(outfile, "w");
    if (all == NULL || f == NULL) {
        fprintf(stderr, "txbb: cannot write %s\n", outfile);
        free(all);
        if (f != NULL) {
            fclose(f);
        }
        pthread_mutex_unlock(&lock);
        return;
    }
    for (size_t i = 0; i < nblocks; i++) {
        all[i] = &chunks[i / CHUNK][i % CHUNK];
    }
    qsort(all, nblocks, sizeof(*all), by_address);
    for (size_t i = 0; i < nblocks; i++) {
        if (all[i]->count != 0) {
            fprintf(f, "0x%" PRIx64 " %" PRIu64 " %" PRIu64 "\n", all[i]->vaddr, all[i]->ninsns,
                    all[i]->count);
        }
    }
    fclose(f);
    free(all);
    pthread_mutex_unlock(&lock);
}

static int parse_address(const char *text, uint64_t *out)
{
    char *end;
    *out = strtoull(text, &end, 0);
    return (*text == '\0' || *end != '\0') ? -1 : 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "outfile=", 8) == 0) {
            outfile = strdup(arg + 8);
        } else if (strncmp(arg, "lo=", 3) == 0) {
            if (parse_address(arg + 3, &lo) != 0) {
                fprintf(stderr, "txbb: bad address in %s (write lo=0x1234)\n", arg);
                return -1;
            }
        } else if (strncmp(arg, "hi=", 3) == 0) {
            if (parse_address(arg + 3, &hi) != 0) {
                fprintf(stderr, "txbb: bad address in %s (write hi=0x1234)\n", arg);
                return -1;
            }
        } else {
            fprintf(stderr, "txbb: unknown argument %s (known: outfile=, lo=, hi=)\n", arg);
            return -1;
        }
    }
    if (outfile == NULL || *outfile == '\0') {
        fprintf(stderr, "txbb: give the output file as outfile=PATH\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, write_counts, NULL);
    return 0;
}
