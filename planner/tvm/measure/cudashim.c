/* Counts the device bytes a process holds from the CUDA allocation calls themselves.
 *
 * Loaded with LD_PRELOAD into a measuring process. TVM's CUDA runtime links libcudart
 * dynamically, so every device storage, tensor and workspace page it asks for passes through
 * the definitions below, which forward to the real functions and keep pointer -> size. Free
 * device memory (cudaMemGetInfo) moves in 2 MiB driver pages, device-wide, and cannot tell
 * an 8 KiB plan from a 2 MiB one; these counts are exact.
 *
 * Each allocation is counted under the tag the measuring process set last (the phase:
 * module, inputs, inference) and, when it happens inside TVM's TVMBackendAllocWorkspace,
 * also as kernel workspace.
 *
 * peakwatch_cuda_stats(out) fills PEAKWATCH_CUDA_STATS size_t values:
 *   out[0]  live bytes                  out[4]  untracked allocations (table full)
 *   out[1]  peak live bytes (see reset)  out[5]  frees of pointers never seen
 *   out[2]  allocations                 out[6]  workspace live bytes
 *   out[3]  bytes allocated             out[7]  workspace bytes allocated
 *   out[8 + 2*t], out[9 + 2*t]: live and allocated bytes of tag t, for t < PEAKWATCH_CUDA_TAGS.
 * Counters only grow (a phase is a difference of two reads) except live bytes and the peak.
 *
 * Not seen: allocations made through calls not defined here (cudaMalloc3D, arrays, pools'
 * cudaMallocFromPoolAsync, the _ptsz variants), and driver calls reached through function
 * pointers (cuGetProcAddress, dlsym on libcuda's own handle), which is how libcudart itself
 * reaches the driver.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define PEAKWATCH_CUDA_TAGS 8
#define PEAKWATCH_CUDA_STATS (8 + 2 * PEAKWATCH_CUDA_TAGS)

#define SLOT_BITS 16
#define SLOTS (1u << SLOT_BITS)
#define TOMBSTONE ((uintptr_t)1)

/* cudaErrorInitializationError and CUDA_ERROR_NOT_INITIALIZED share the number. */
#define NOT_INITIALISED 3

typedef unsigned long long CUdeviceptr;
typedef void *stream_t;

static struct {
    uintptr_t ptr;
    size_t size;
    unsigned char tag;
    unsigned char workspace;
} table[SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t live_bytes, peak_bytes, allocations, allocated_bytes, untracked, unknown_frees;
static size_t workspace_live, workspace_allocated;
static size_t tag_live[PEAKWATCH_CUDA_TAGS], tag_allocated[PEAKWATCH_CUDA_TAGS];
static int current_tag;

/* cudaMalloc may reach an interposed cuMemAlloc_v2 on its way to the driver: only the
 * outermost call of a thread counts. */
static __thread int depth;
static __thread int in_workspace;

/* Device pointers are aligned to 256 bytes or more, so the low bits say nothing:
 * Fibonacci hashing keeps the high bits of the product, which every bit feeds. */
static size_t slot_of(uintptr_t ptr) {
    return (size_t)(((uint64_t)ptr * 0x9E3779B97F4A7C15ull) >> (64 - SLOT_BITS));
}

static void record(uintptr_t ptr, size_t size) {
    if (ptr == 0) return; /* a zero-byte request: nothing to free later */
    pthread_mutex_lock(&lock);
    size_t i = slot_of(ptr), probes = 0;
    while (table[i].ptr != 0 && table[i].ptr != TOMBSTONE && probes < SLOTS) {
        i = (i + 1) % SLOTS;
        probes++;
    }
    if (probes < SLOTS) {
        int tag = __atomic_load_n(&current_tag, __ATOMIC_RELAXED);
        table[i].ptr = ptr;
        table[i].size = size;
        table[i].tag = (unsigned char)tag;
        table[i].workspace = in_workspace != 0;
        live_bytes += size;
        allocated_bytes += size;
        allocations++;
        tag_live[tag] += size;
        tag_allocated[tag] += size;
        if (in_workspace) {
            workspace_live += size;
            workspace_allocated += size;
        }
        if (live_bytes > peak_bytes) peak_bytes = live_bytes;
    } else {
        untracked++;
    }
    pthread_mutex_unlock(&lock);
}

static void forget(uintptr_t ptr) {
    if (ptr == 0) return; /* cudaFree(NULL) is legal and frees nothing */
    pthread_mutex_lock(&lock);
    size_t i = slot_of(ptr), probes = 0;
    int found = 0;
    while (table[i].ptr != 0 && probes < SLOTS) {
        if (table[i].ptr == ptr) {
            live_bytes -= table[i].size;
            tag_live[table[i].tag] -= table[i].size;
            if (table[i].workspace) workspace_live -= table[i].size;
            table[i].ptr = TOMBSTONE;
            found = 1;
            break;
        }
        i = (i + 1) % SLOTS;
        probes++;
    }
    if (!found) unknown_frees++;
    pthread_mutex_unlock(&lock);
}

/* The definition `name` would have had without this library. RTLD_NEXT searches only the
 * global scope, and TVM loads libtvm_runtime_cuda.so (with libcudart, its dependency)
 * RTLD_LOCAL: then each loaded object is asked in turn, through its own handle, whose
 * search list is it and its dependencies, never this library. */
static void *next_definition(const char *name, void *self) {
    void *found = dlsym(RTLD_NEXT, name);
    if (found != NULL && found != self) return found;
    found = NULL;
    struct link_map *map = NULL;
    void *global = dlopen(NULL, RTLD_LAZY);
    if (global == NULL || dlinfo(global, RTLD_DI_LINKMAP, &map) != 0) map = NULL;
    for (; map != NULL && found == NULL; map = map->l_next) {
        if (map->l_name == NULL || map->l_name[0] == '\0') continue; /* the program: us */
        void *handle = dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD);
        if (handle == NULL) continue;
        void *candidate = dlsym(handle, name);
        if (candidate != NULL && candidate != self) found = candidate;
        dlclose(handle);
    }
    if (global != NULL) dlclose(global);
    return found;
}

/* Resolved on first use, not at load: libcudart is loaded after this library. */
#define REAL(name)                                                               \
    static __typeof__(&name) real_##name;                                        \
    __typeof__(&name) fn_##name = __atomic_load_n(&real_##name, __ATOMIC_ACQUIRE); \
    if (fn_##name == NULL) {                                                     \
        fn_##name = (__typeof__(&name))next_definition(#name, (void *)name);     \
        __atomic_store_n(&real_##name, fn_##name, __ATOMIC_RELEASE);             \
    }

#define CALL(fn, ...)                  \
    ({                                 \
        depth++;                       \
        int status_ = fn(__VA_ARGS__); \
        depth--;                       \
        status_;                       \
    })

/* The CUDA runtime API. */

int cudaMalloc(void **ptr, size_t size) {
    REAL(cudaMalloc);
    if (fn_cudaMalloc == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cudaMalloc, ptr, size);
    if (status == 0 && depth == 0) record((uintptr_t)*ptr, size);
    return status;
}

int cudaMallocAsync(void **ptr, size_t size, stream_t stream) {
    REAL(cudaMallocAsync);
    if (fn_cudaMallocAsync == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cudaMallocAsync, ptr, size, stream);
    if (status == 0 && depth == 0) record((uintptr_t)*ptr, size);
    return status;
}

int cudaMallocManaged(void **ptr, size_t size, unsigned int flags) {
    REAL(cudaMallocManaged);
    if (fn_cudaMallocManaged == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cudaMallocManaged, ptr, size, flags);
    if (status == 0 && depth == 0) record((uintptr_t)*ptr, size);
    return status;
}

int cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
    REAL(cudaMallocPitch);
    if (fn_cudaMallocPitch == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cudaMallocPitch, ptr, pitch, width, height);
    if (status == 0 && depth == 0) record((uintptr_t)*ptr, *pitch * height);
    return status;
}

int cudaFree(void *ptr) {
    REAL(cudaFree);
    if (fn_cudaFree == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cudaFree, ptr);
    if (status == 0 && depth == 0) forget((uintptr_t)ptr);
    return status;
}

int cudaFreeAsync(void *ptr, stream_t stream) {
    REAL(cudaFreeAsync);
    if (fn_cudaFreeAsync == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cudaFreeAsync, ptr, stream);
    if (status == 0 && depth == 0) forget((uintptr_t)ptr);
    return status;
}

/* The driver API, for code that links libcuda itself. */

int cuMemAlloc_v2(CUdeviceptr *ptr, size_t size) {
    REAL(cuMemAlloc_v2);
    if (fn_cuMemAlloc_v2 == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cuMemAlloc_v2, ptr, size);
    if (status == 0 && depth == 0) record((uintptr_t)*ptr, size);
    return status;
}

int cuMemAllocAsync(CUdeviceptr *ptr, size_t size, stream_t stream) {
    REAL(cuMemAllocAsync);
    if (fn_cuMemAllocAsync == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cuMemAllocAsync, ptr, size, stream);
    if (status == 0 && depth == 0) record((uintptr_t)*ptr, size);
    return status;
}

int cuMemAllocManaged(CUdeviceptr *ptr, size_t size, unsigned int flags) {
    REAL(cuMemAllocManaged);
    if (fn_cuMemAllocManaged == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cuMemAllocManaged, ptr, size, flags);
    if (status == 0 && depth == 0) record((uintptr_t)*ptr, size);
    return status;
}

int cuMemAllocPitch_v2(CUdeviceptr *ptr, size_t *pitch, size_t width, size_t height,
                       unsigned int element_size) {
    REAL(cuMemAllocPitch_v2);
    if (fn_cuMemAllocPitch_v2 == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cuMemAllocPitch_v2, ptr, pitch, width, height, element_size);
    if (status == 0 && depth == 0) record((uintptr_t)*ptr, *pitch * height);
    return status;
}

int cuMemFree_v2(CUdeviceptr ptr) {
    REAL(cuMemFree_v2);
    if (fn_cuMemFree_v2 == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cuMemFree_v2, ptr);
    if (status == 0 && depth == 0) forget((uintptr_t)ptr);
    return status;
}

int cuMemFreeAsync(CUdeviceptr ptr, stream_t stream) {
    REAL(cuMemFreeAsync);
    if (fn_cuMemFreeAsync == NULL) return NOT_INITIALISED;
    int status = CALL(fn_cuMemFreeAsync, ptr, stream);
    if (status == 0 && depth == 0) forget((uintptr_t)ptr);
    return status;
}

/* TVM's kernel workspace. libtvm_runtime.so takes these functions' addresses through its
 * GOT when it registers them as the modules' context symbols, so a kernel's workspace
 * request lands here. Not counted as a call of its own: what it costs is the device
 * allocation inside, if any (TVM's pool keeps freed pages and rounds requests to 4 KiB). */

void *TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                               int dtype_code_hint, int dtype_bits_hint) {
    REAL(TVMBackendAllocWorkspace);
    if (fn_TVMBackendAllocWorkspace == NULL) return NULL;
    int outer = in_workspace;
    in_workspace = 1;
    void *ptr = fn_TVMBackendAllocWorkspace(device_type, device_id, nbytes, dtype_code_hint,
                                            dtype_bits_hint);
    in_workspace = outer;
    return ptr;
}

/* Only forwarded: a page the pool does return is found by its pointer, which carries its
 * workspace mark. */
int TVMBackendFreeWorkspace(int device_type, int device_id, void *ptr) {
    REAL(TVMBackendFreeWorkspace);
    if (fn_TVMBackendFreeWorkspace == NULL) return -1;
    return fn_TVMBackendFreeWorkspace(device_type, device_id, ptr);
}

/* The measuring process's side. */

/* Later allocations count under `tag` (0 <= tag < PEAKWATCH_CUDA_TAGS); -1 refuses another. */
int peakwatch_cuda_set_tag(int tag) {
    if (tag < 0 || tag >= PEAKWATCH_CUDA_TAGS) return -1;
    __atomic_store_n(&current_tag, tag, __ATOMIC_RELAXED);
    return 0;
}

/* Start a new phase: the peak restarts from what is live now. */
void peakwatch_cuda_reset_peak(void) {
    pthread_mutex_lock(&lock);
    peak_bytes = live_bytes;
    pthread_mutex_unlock(&lock);
}

void peakwatch_cuda_stats(size_t *out) {
    pthread_mutex_lock(&lock);
    out[0] = live_bytes;
    out[1] = peak_bytes;
    out[2] = allocations;
    out[3] = allocated_bytes;
    out[4] = untracked;
    out[5] = unknown_frees;
    out[6] = workspace_live;
    out[7] = workspace_allocated;
    for (int t = 0; t < PEAKWATCH_CUDA_TAGS; t++) {
        out[8 + 2 * t] = tag_live[t];
        out[9 + 2 * t] = tag_allocated[t];
    }
    pthread_mutex_unlock(&lock);
}
