/*
 * A QEMU TCG plugin that counts the guest instructions executed between two addresses.
 *
 * Debian's QEMU is built with plugin support but ships neither the contrib plugins nor
 * qemu-plugin.h, so the few entry points of plugin API version 1 (QEMU 4.2 to 8.x) used
 * here are declared by hand. Arguments: begin=ADDR,end=ADDR (the first instructions of
 * two marker functions, hex) and out=FILE, where "BEGIN END TOTAL" counts are written when
 * QEMU exits. Counting is inline (no callback per instruction), so it costs little and,
 * with one vCPU and no interrupts, gives the same count on every run.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct {
    const char *target_name;
    struct { int min; int cur; } version;
    bool system_emulation;
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*tb_trans_cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*vcpu_udata_cb)(unsigned int vcpu_index, void *userdata);
typedef void (*udata_cb)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, vcpu_udata_cb cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                enum qemu_plugin_op op, void *ptr,
                                                uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, udata_cb cb, void *userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static uint64_t total, at_begin, at_end;
static uint64_t begin_addr = UINT64_MAX, end_addr = UINT64_MAX;
static char out_path[4096] = "insn_count.txt";

static void mark_begin(unsigned int vcpu, void *data) { (void)vcpu; (void)data; at_begin = total; }
static void mark_end(unsigned int vcpu, void *data) { (void)vcpu; (void)data; at_end = total; }

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        /* The marks are taken before the marked instruction counts, at both ends alike. */
        if (vaddr == begin_addr) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_begin, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
        if (vaddr == end_addr) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_end, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &total, 1);
    }
}

static void write_counts(qemu_plugin_id_t id, void *data)
{
    (void)id; (void)data;
    FILE *f = fopen(out_path, "w");
    if (f) {
        fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", at_begin, at_end, total);
        fclose(f);
    }
}

__attribute__((visibility("default"))) int qemu_plugin_install(
    qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "begin=", 6) == 0) {
            begin_addr = strtoull(arg + 6, NULL, 16);
        } else if (strncmp(arg, "end=", 4) == 0) {
            end_addr = strtoull(arg + 4, NULL, 16);
        } else if (strncmp(arg, "out=", 4) == 0) {
            snprintf(out_path, sizeof out_path, "%s", arg + 4);
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, write_counts, NULL);
    return 0;
}
