/* Counts the bytes TVM's CPU runtime holds from the C allocator.
 *
 * Loaded with LD_PRELOAD into a measuring process: every CPU allocation of TVM's runtime
 * (VM storages, allocator pools, the kernel workspace pool, tensors) goes through
 * posix_memalign, so wrapping it and free gives exact live and peak bytes, where process
 * RSS would mix in the interpreter, page rounding and the allocator's own caching.
 *
 * A job's own process preloads it idle (PEAKWATCH_MEMSHIM_IDLE set): its compile counts
 * nothing and pays one branch an allocation, and the measuring process it forks once TVM
 * is imported starts counting there (peakwatch_start_counting), so a job imports TVM once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *ptr);

#define SLOTS (1u << 18)
#define TOMBSTONE ((void *)1)

static struct { void *ptr; size_t size; } table[SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t live_bytes, peak_bytes, requested_bytes, calls, untracked;

static volatile int counting = 1;

__attribute__((constructor)) static void peakwatch_init(void) {
    if (getenv("PEAKWATCH_MEMSHIM_IDLE") != NULL) counting = 0;
}

void peakwatch_start_counting(void) { counting = 1; }

static size_t slot_of(void *ptr) { return ((uintptr_t)ptr >> 4) * 2654435761u % SLOTS; }

int posix_memalign(void **out, size_t alignment, size_t size) {
    void *ptr = __libc_memalign(alignment, size);
    if (ptr == NULL) return ENOMEM;
    *out = ptr;
    if (!counting) return 0;
    pthread_mutex_lock(&lock);
    size_t i = slot_of(ptr), probes = 0;
    while (table[i].ptr != NULL && table[i].ptr != TOMBSTONE && probes < SLOTS) {
        i = (i + 1) % SLOTS;
        probes++;
    }
    if (probes < SLOTS) {
        table[i].ptr = ptr;
        table[i].size = size;
        live_bytes += size;
        requested_bytes += size;
        calls++;
        if (live_bytes > peak_bytes) peak_bytes = live_bytes;
    } else {
        untracked++;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

void free(void *ptr) {
    if (ptr != NULL && counting) {
        pthread_mutex_lock(&lock);
        size_t i = slot_of(ptr), probes = 0;
        while (table[i].ptr != NULL && probes < SLOTS) {
            if (table[i].ptr == ptr) {
                live_bytes -= table[i].size;
                table[i].ptr = TOMBSTONE;
                break;
            }
            i = (i + 1) % SLOTS;
            probes++;
        }
        pthread_mutex_unlock(&lock);
    }
    __libc_free(ptr);
}

/* Start a new phase: the peak restarts from what is live now. */
void peakwatch_reset_peak(void) {
    pthread_mutex_lock(&lock);
    peak_bytes = live_bytes;
    requested_bytes = 0;
    calls = 0;
    pthread_mutex_unlock(&lock);
}

void peakwatch_stats(size_t *out) {
    pthread_mutex_lock(&lock);
    out[0] = live_bytes;
    out[1] = peak_bytes;
    out[2] = requested_bytes;
    out[3] = calls;
    out[4] = untracked;
    pthread_mutex_unlock(&lock);
}

/* The sizes of the allocations live now, up to ``capacity`` of them; returns how many are
 * live. Two calls around a step tell which allocations it made and kept (a KV cache's pages
 * apart from its working buffers), not only their sum. */
size_t peakwatch_live_sizes(size_t *out, size_t capacity) {
    size_t count = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < SLOTS; i++) {
        if (table[i].ptr == NULL || table[i].ptr == TOMBSTONE) continue;
        if (count < capacity) out[count] = table[i].size;
        count++;
    }
    pthread_mutex_unlock(&lock);
    return count;
}
