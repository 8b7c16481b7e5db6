/*
 * The few types and functions that TVM's generated C kernels refer to, so they compile
 * without TVM's headers or runtime. The layouts follow DLPack and tvm-ffi (TVMFFIAny):
 * kernels read their arguments through them, so they must not change.
 */
#ifndef PEAKWATCH_TVM_H
#define PEAKWATCH_TVM_H

#include <stddef.h>
#include <stdint.h>

#define TVM_DLL
#define TVM_FFI_DLL

typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;

typedef struct {
    int32_t type_index;
    uint32_t zero_padding;
    union {
        int64_t v_int64;
        double v_float64;
        void *v_ptr;
        const char *v_c_str;
        uint64_t v_uint64;
    };
} TVMFFIAny;

/* tvm-ffi's type index for a borrowed DLTensor pointer. */
#define PEAKWATCH_FFI_DLTENSOR_PTR 7

typedef struct { void *sync_handle; int32_t num_task; } TVMParallelGroupEnv;
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv *penv, void *cdata);

void *TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                               int dtype_code_hint, int dtype_bits_hint);
int TVMBackendFreeWorkspace(int device_type, int device_id, void *ptr);
int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void *cdata, int num_task);
void TVMFFIErrorSetRaisedFromCStrParts(const char *kind, const char **parts, int32_t n);
void TVMFFIErrorSetRaisedFromCStr(const char *kind, const char *message);

/* What the driver exposes, and what the runtime counts. */
int peakwatch_run(const void *input, void *output);
uint32_t peakwatch_workspace_high_water(void);
const char *peakwatch_last_error(void);

#endif
