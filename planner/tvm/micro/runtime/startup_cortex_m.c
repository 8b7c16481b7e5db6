/*
 * Reset for a Cortex-M image that QEMU loads whole (code and initial data in place): copy
 * .data from its load image, clear .bss, turn the FPU on where there is one, run main.
 */
#include <stdint.h>

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_top[];
int main(void);

static void semihost_exit_failure(void)
{
    register int r0 __asm__("r0") = 0x18;          /* SYS_EXIT */
    register uint32_t r1 __asm__("r1") = 0x20023u; /* RunTimeErrorUnknown */
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    for (;;) {
    }
}

void Reset_Handler(void)
{
    uint32_t *src = __data_load;
    for (uint32_t *dst = __data_start; dst < __data_end;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = __bss_start; dst < __bss_end;) {
        *dst++ = 0;
    }
#if defined(__ARM_FP)
    /* Full access to coprocessors 10 and 11 (the FPU) before any floating-point code. */
    volatile uint32_t *cpacr = (volatile uint32_t *)0xE000ED88u;
    *cpacr |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    main();
    semihost_exit_failure(); /* main ends through semihosting; getting here is an error */
}

/* A fault ends the emulator with a failure, instead of hanging it. */
void Fault_Handler(void) { semihost_exit_failure(); }

__attribute__((section(".isr_vector"), used)) const void *const peakwatch_vectors[16] = {
    __stack_top,
    (const void *)Reset_Handler,
    (const void *)Fault_Handler, /* NMI */
    (const void *)Fault_Handler, /* HardFault */
    (const void *)Fault_Handler, /* MemManage */
    (const void *)Fault_Handler, /* BusFault */
    (const void *)Fault_Handler, /* UsageFault */
};
