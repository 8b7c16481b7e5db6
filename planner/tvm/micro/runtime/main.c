/*
 * The harness around peakwatch_run: read input.bin, run one inference, write output.bin
 * and report.txt in the current directory. On the board the files go through semihosting
 * (the emulator's host does the I/O), so the image needs no file system and no stdio.
 */
#include "peakwatch_tvm.h"
#include "model.h"

uint8_t peakwatch_input[PEAKWATCH_INPUT_BYTES] __attribute__((aligned(64)));
uint8_t peakwatch_output[PEAKWATCH_OUTPUT_BYTES] __attribute__((aligned(64)));

/* The emulator's instruction counter reads the counts at the first instruction of these. */
__attribute__((noinline)) void peakwatch_mark_begin(void) { __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void peakwatch_mark_end(void) { __asm__ volatile("" ::: "memory"); }

#ifdef PEAKWATCH_SEMIHOSTING

enum { SYS_OPEN = 0x01, SYS_CLOSE = 0x02, SYS_WRITE = 0x05, SYS_READ = 0x06, SYS_EXIT = 0x18 };

static int semihost(int op, void *arg)
{
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static uint32_t length(const char *s)
{
    uint32_t n = 0;
    while (s[n]) {
        n++;
    }
    return n;
}

static int transfer(const char *path, int mode, int op, void *buf, uint32_t n)
{
    uint32_t open_args[3] = {(uint32_t)path, (uint32_t)mode, length(path)};
    int handle = semihost(SYS_OPEN, open_args);
    if (handle < 0) {
        return -1;
    }
    uint32_t io_args[3] = {(uint32_t)handle, (uint32_t)buf, n};
    int left = n ? semihost(op, io_args) : 0; /* bytes NOT transferred */
    semihost(SYS_CLOSE, &handle);
    return left == 0 ? 0 : -1;
}

static int read_file(const char *path, void *buf, uint32_t n)
{
    return transfer(path, 1 /* "rb" */, SYS_READ, buf, n);
}

static int write_file(const char *path, const void *buf, uint32_t n)
{
    return transfer(path, 5 /* "wb" */, SYS_WRITE, (void *)buf, n);
}

static void finish(int status)
{
    /* ADP_Stopped_ApplicationExit ends QEMU with 0, RunTimeErrorUnknown with 1. */
    semihost(SYS_EXIT, (void *)(status == 0 ? 0x20026u : 0x20023u));
    for (;;) {
    }
}

#define STACK_PAINT 0xC5C5C5C5u
extern uint32_t __stack_limit[];
extern uint32_t __stack_top[];

/* Paint the unused stack so that the deepest point any call reached can be found after. */
__attribute__((noinline)) static void paint_stack(void)
{
    uint32_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (volatile uint32_t *p = __stack_limit; (uint32_t)p < sp - 64u; p++) {
        *p = STACK_PAINT;
    }
}

static uint32_t stack_high_water(void)
{
    const uint32_t *p = __stack_limit;
    while (p < __stack_top && *p == STACK_PAINT) {
        p++;
    }
    return (uint32_t)((const uint8_t *)__stack_top - (const uint8_t *)p);
}

#else /* a host build, run as a process */

#include <stdio.h>
#include <stdlib.h>

static int read_file(const char *path, void *buf, uint32_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return -1;
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    return got == n ? 0 : -1;
}

static int write_file(const char *path, const void *buf, uint32_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        return -1;
    }
    size_t put = fwrite(buf, 1, n, f);
    fclose(f);
    return put == n ? 0 : -1;
}

static void finish(int status) { exit(status == 0 ? 0 : 1); }
static void paint_stack(void) {}
static uint32_t stack_high_water(void) { return 0; }

#endif

static char *append(char *at, const char *text)
{
    while (*text) {
        *at++ = *text++;
    }
    return at;
}

static char *append_int(char *at, int32_t value)
{
    char digits[12];
    int n = 0;
    uint32_t v = value < 0 ? (uint32_t)(-(int64_t)value) : (uint32_t)value;
    if (value < 0) {
        *at++ = '-';
    }
    do {
        digits[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    while (n) {
        *at++ = digits[--n];
    }
    return at;
}

int main(void)
{
    static char report[256];
    int status = read_file("input.bin", peakwatch_input, PEAKWATCH_INPUT_BYTES) == 0 ? 0 : 2;
    if (status == 0) {
        paint_stack();
        peakwatch_mark_begin();
        status = peakwatch_run(peakwatch_input, peakwatch_output);
        peakwatch_mark_end();
    }
    if (status == 0 && write_file("output.bin", peakwatch_output, PEAKWATCH_OUTPUT_BYTES) != 0) {
        status = 3;
    }
    char *at = append(report, "status=");
    at = append_int(at, status);
    at = append(at, "\nstack_bytes=");
    at = append_int(at, (int32_t)stack_high_water());
    at = append(at, "\nworkspace_bytes=");
    at = append_int(at, (int32_t)peakwatch_workspace_high_water());
    at = append(at, "\nerror=");
    at = append(at, peakwatch_last_error());
    at = append(at, "\n");
    write_file("report.txt", report, (uint32_t)(at - report));
    finish(status);
    return status;
}
