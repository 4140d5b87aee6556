/*
 * swemu_common.h - private header shared by the swemu athread emulator headers
 * (athread.h, slave.h, simd.h, dma.h, crts.h) and athread_emu.c.
 *
 * swemu runs Sunway SW26010 / SW26010-Pro athread programs on x86 with gcc:
 * every CPE is a pthread, LDM is thread-local storage, DMA/RMA are memcpy's
 * that complete immediately.  See README.md in this directory.
 *
 * Nothing in here is part of the real Sunway API except the enums and the
 * reply-word typedefs; every other name starts with swemu_ / SWEMU_.
 */
#ifndef SWEMU_COMMON_H
#define SWEMU_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define SWEMU 1            /* lets generated code detect the emulator */
#define SWEMU_VERSION 1
#define SWEMU_MAX_CPES 64
#define SWEMU_MAX_CGS 6  /* core groups of an SW26010-Pro chip (4 on an SW26010) */
#define SWEMU_ERROR_EXIT 86 /* process exit code after an emulator error */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- enums of the SW26010 slave.h (values as in sw5cc slave.h) ---- */
#ifndef SWEMU_NO_ENUMS
typedef enum { PE_MODE, BCAST_MODE, ROW_MODE, BROW_MODE, RANK_MODE } dma_mode;
typedef enum { DMA_PUT, DMA_GET, DMA_PUT_P, DMA_GET_P, DMA_QUEUE, DMA_BARRIER = 5 } DMA_OP;
typedef DMA_OP dma_op;
/* PP_SCOPE is the SW26010-Pro peer-to-peer scope (mask = peer CPE id). */
typedef enum { ROW_SCOPE, COL_SCOPE, ARRAY_SCOPE, PP_SCOPE } scope;
#endif

/* ---- reply words ----
 * SW26010 athread_get/put: reply is a 32-bit word in LDM (incremented as int).
 * SW26010-Pro: athread_rply_t is `volatile long` (swgcc crts2ath.h), the CRTS
 * slave header uses `volatile int` for crts_rply_t.  The Pro macros below
 * accept either: the width is taken from the pointer type (SWEMU_RSZ). */
typedef volatile long athread_rply_t;
typedef volatile int crts_rply_t;

#define SWEMU_RSZ(r) _Generic((r),                                            \
    volatile int *: 4, int *: 4, volatile unsigned *: 4, unsigned *: 4,       \
    volatile long *: 8, long *: 8, volatile unsigned long *: 8,               \
    unsigned long *: 8, volatile long long *: 8, long long *: 8,              \
    volatile unsigned long long *: 8, unsigned long long *: 8,                \
    default: 8)

/* ---- internal entry points (implemented in athread_emu.c) ---- */
int  swemu_self(void);                      /* CPE id, -1 on the host (MPE)  */
int  swemu_cgs(void);                       /* core groups emulated (SWEMU_CGS) */
int  swemu_num_cpes(void);                  /* CPEs in the current spawn     */
unsigned long swemu_cpe_cycles(void);       /* CPE clock (RPCC / stime)      */
unsigned long swemu_mpe_cycles(void);       /* MPE clock (rtc / time_cycle)  */
unsigned long swemu_cycles(void);           /* CPE clock on a CPE, else MPE  */

/* Pro DMA.  op: 1 = get (mem->LDM), 0 = put (LDM->mem).
 * bc: 0 none, 1 all CPEs, 2 issuer's row, 3 issuer's column.
 * coll: 0 = issued by this CPE, 1 = collective (all members call, root issues). */
int  swemu_pro_dma(int op, void *dst, void *src, long len, long bsize,
                   long stride, void *rply, int rsize, int bc, int coll,
                   const char *api);
/* Pro RMA.  kind: see SWEMU_RMA_* below. */
int  swemu_rma(int kind, void *laddr, void *lrply, int lsize, long len,
               int rtid, void *raddr, void *rrply, int rsize, unsigned mask,
               const char *api);
int  swemu_wait_value(const volatile void *rply, int rsize, long value,
                      const char *api);
int  swemu_sync(int scp, int mask, const char *api);

/* register communication (SW26010).  dir: 0 = row bus, 1 = column bus */
void swemu_rlc_put(int dir, const void *v, int size, int dst);
void swemu_rlc_get(int dir, void *v, int size);

/* SIMD alignment check (only counts a warning per CPE) */
void swemu_simd_unaligned(const void *p, int need);

/* dma.h descriptor API support */
int  swemu_reply_index(void *reply);
void *swemu_reply_ptr(int index);
int  swemu_desc_dma(int op, int mode, long size, long bsize, long stride,
                    int mask, int reply_index, long mem, long ldm);

#define SWEMU_RMA_PUT        0
#define SWEMU_RMA_GET        1
#define SWEMU_RMA_BCAST      2   /* all CPEs (incl. issuer)                   */
#define SWEMU_RMA_ROW_BCAST  3   /* issuer's row (incl. issuer)               */
#define SWEMU_RMA_COL_BCAST  4   /* issuer's column (incl. issuer)            */
#define SWEMU_RMA_ROW_MCAST  5   /* rows in mask (excl. issuer)               */
#define SWEMU_RMA_COL_MCAST  6   /* columns in mask (excl. issuer)            */
#define SWEMU_RMA_BCAST_COLL 7   /* collective: root = mask                    */
#define SWEMU_RMA_ROW_BCAST_COLL 8 /* collective per row: root column = mask  */
#define SWEMU_RMA_COL_BCAST_COLL 9 /* collective per column: root row = mask  */

/* rpcc(): cycle counter usable on both sides (define SWEMU_NO_RPCC if the
 * program defines its own rpcc) */
#ifndef SWEMU_NO_RPCC
static inline unsigned long rpcc(void) { return swemu_cycles(); }
#endif

#ifdef __cplusplus
}
#endif

#endif /* SWEMU_COMMON_H */
