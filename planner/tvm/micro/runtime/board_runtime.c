/*
 * What TVM's runtime would otherwise provide to the kernels, without malloc.
 *
 * Kernels still ask for some temporaries through TVMBackendAllocWorkspace. They get them
 * from one static region whose size the exporter computed from the kernels' own requests,
 * so the image states its whole RAM need; a request that does not fit fails the kernel
 * instead of reaching for a heap. Requests come and go in nested order within a kernel,
 * so a stack of allocations is enough; the high-water mark is kept to check the size.
 */
#include "peakwatch_tvm.h"
#include "model.h"

#define WS_ALIGN 64u
#define WS_MAX_LIVE 64

uint8_t peakwatch_workspace[PEAKWATCH_WORKSPACE_BYTES > 0 ? PEAKWATCH_WORKSPACE_BYTES : 1] __attribute__((aligned(64)));
static uint32_t ws_top, ws_high;
static uint32_t ws_starts[WS_MAX_LIVE];
static uint8_t ws_freed[WS_MAX_LIVE];
static int ws_live;
static const char *last_error = "";

void *TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                               int dtype_code_hint, int dtype_bits_hint)
{
    (void)device_type; (void)device_id; (void)dtype_code_hint; (void)dtype_bits_hint;
    uint32_t start = (ws_top + WS_ALIGN - 1u) & ~(WS_ALIGN - 1u);
    if (ws_live == WS_MAX_LIVE || nbytes > (uint64_t)PEAKWATCH_WORKSPACE_BYTES - start) {
        last_error = "workspace region too small";
        return NULL;
    }
    ws_starts[ws_live] = ws_top;
    ws_freed[ws_live] = 0;
    ws_live++;
    ws_top = start + (uint32_t)nbytes;
    if (ws_top > ws_high) {
        ws_high = ws_top;
    }
    return peakwatch_workspace + start;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void *ptr)
{
    (void)device_type; (void)device_id;
    uint32_t offset = (uint32_t)((uint8_t *)ptr - peakwatch_workspace);
    for (int i = ws_live - 1; i >= 0; i--) {
        uint32_t start = (ws_starts[i] + WS_ALIGN - 1u) & ~(WS_ALIGN - 1u);
        if (start == offset) {
            ws_freed[i] = 1;
            break;
        }
    }
    /* Out-of-order frees wait until everything above them is freed too. */
    while (ws_live > 0 && ws_freed[ws_live - 1]) {
        ws_live--;
        ws_top = ws_starts[ws_live];
    }
    return 0;
}

int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void *cdata, int num_task)
{
    /* One core: run the parallel loop as a single task. */
    (void)num_task;
    TVMParallelGroupEnv env = {NULL, 1};
    return flambda(0, &env, cdata);
}

void TVMFFIErrorSetRaisedFromCStrParts(const char *kind, const char **parts, int32_t n)
{
    (void)parts; (void)n;
    last_error = kind;
}

void TVMFFIErrorSetRaisedFromCStr(const char *kind, const char *message)
{
    (void)message;
    last_error = kind;
}

uint32_t peakwatch_workspace_high_water(void) { return ws_high; }

const char *peakwatch_last_error(void) { return last_error; }
