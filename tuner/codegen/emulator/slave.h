/*
 * slave.h - swemu replacement for the Sunway CPE (slave) header.
 *
 * Covers the SW26010 (sw5cc) slave API: __thread_local, _MYID/_ROW/_COL/_PEN/
 * _CGN, athread_get/athread_put (all five DMA modes, strided), athread_syn,
 * athread_get_id, ldm_malloc/ldm_free, RPCC/RTC; and the SW26010-Pro (swgcc)
 * athread_dma_* / athread_rma_* / athread_ssync* API.  See README.md.
 */
#ifndef SWEMU_SLAVE_H
#define SWEMU_SLAVE_H

#include "swemu_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- LDM variables ----
 * Every __thread_local object is a thread-local variable (one copy per CPE
 * thread) placed in the dedicated TLS section "swemu_ldm".  Its total size,
 * taken from the linker symbols __start_swemu_ldm/__stop_swemu_ldm, is the
 * static LDM usage checked against SWEMU_LDM_BYTES. */
#define __thread_local      _Thread_local __attribute__((section("swemu_ldm")))
#define __thread_local_fix  __thread_local
#define __thread_local_share __thread_local
#define __ldm               __thread_local

/* ---- CPE identity (per-thread values, set before the kernel starts) ---- */
extern _Thread_local int  _MYID;   /* 0..63, = row*8+col */
extern _Thread_local char _ROW, _COL, _PEN, _CGN;

int athread_get_id(int core);      /* athread_get_id(-1) == _MYID        */
int athread_get_core(int id);

/* ---- SW26010 DMA (sw5cc slave.h) ----
 * athread_get: main memory (src) -> LDM (dest); athread_put: LDM (src) ->
 * main memory (dest).  stride = gap in bytes between bsize-byte blocks on
 * the main-memory side (LDM side contiguous).  Completes immediately and
 * adds 1 to the 32-bit reply word. */
int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply,
                char mask, int stride, int bsize);
int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply,
                int stride, int bsize);
#define athread_get_p athread_get
#define athread_put_p athread_put
int athread_syn(scope scp, int mask);

/* ---- LDM heap ---- */
void *ldm_malloc(size_t size);
void  ldm_free(void *addr, size_t size);
unsigned int get_allocatable_size(void);

/* ---- cycle counters (CPE clock: 1.45 GHz SW26010, 2.25 GHz Pro) ---- */
#ifndef SWEMU_NO_RPCC
#ifndef RPCC
#define RPCC(x) ((x) = swemu_cpe_cycles())
#endif
#ifndef RTC
#define RTC() swemu_cpe_cycles()
#endif
#endif
#define athread_stime_cycle() swemu_cpe_cycles()
#define CRTS_stime_cycle()    swemu_cpe_cycles()

/* ================= SW26010-Pro (swgcc athread / CRTS) ================= */

#define athread_get_tid() ((int)_PEN)
#define athread_get_rid() ((int)_ROW)
#define athread_get_cid() ((int)_COL)
#define athread_get_cgn() ((int)_CGN)
#define athread_tid _PEN
#define athread_rid _ROW
#define athread_cid _COL
#define athread_cgn _CGN
#define CRTS_tid ((int)_PEN)
#define CRTS_rid ((int)_ROW)
#define CRTS_cid ((int)_COL)
#define CRTS_cgn ((int)_CGN)
#define CRTS_CGN ((int)_CGN)

#define CRTS_pldm_malloc        ldm_malloc
#define CRTS_pldm_free          ldm_free
#define CRTS_pldm_get_free_size get_allocatable_size

/* -- synchronisation -- */
#define athread_ssync_array()      swemu_sync(ARRAY_SCOPE, 0xffff, "athread_ssync_array")
#define athread_ssync(scp, mask)   swemu_sync((scp), (mask), "athread_ssync")
#define athread_ssync_node()       swemu_sync(ARRAY_SCOPE, 0xffff, "athread_ssync_node")
#define CRTS_ssync_array()         swemu_sync(ARRAY_SCOPE, 0xffff, "CRTS_ssync_array")
#define CRTS_ssync_row()           swemu_sync(ROW_SCOPE, 0xff, "CRTS_ssync_row")
#define CRTS_ssync_col()           swemu_sync(COL_SCOPE, 0xff, "CRTS_ssync_col")

/* -- DMA: argument order is (dst, src, ...) -- */
#define SWEMU_PDMA(op, d, s, l, bs, st, r, rs, bc, co, name)                  \
    swemu_pro_dma((op), (void *)(d), (void *)(s), (long)(l), (long)(bs),      \
                  (long)(st), (void *)(r), (rs), (bc), (co), (name))

#define athread_dma_get(dst, src, len) \
    SWEMU_PDMA(1, dst, src, len, 0, 0, 0, 0, 0, 0, "athread_dma_get")
#define athread_dma_put(dst, src, len) \
    SWEMU_PDMA(0, dst, src, len, 0, 0, 0, 0, 0, 0, "athread_dma_put")
#define athread_dma_get_stride(dst, src, len, bsize, stride) \
    SWEMU_PDMA(1, dst, src, len, bsize, stride, 0, 0, 0, 0, "athread_dma_get_stride")
#define athread_dma_put_stride(dst, src, len, bsize, stride) \
    SWEMU_PDMA(0, dst, src, len, bsize, stride, 0, 0, 0, 0, "athread_dma_put_stride")
#define athread_dma_iget(dst, src, len, rply) \
    SWEMU_PDMA(1, dst, src, len, 0, 0, rply, SWEMU_RSZ(rply), 0, 0, "athread_dma_iget")
#define athread_dma_iput(dst, src, len, rply) \
    SWEMU_PDMA(0, dst, src, len, 0, 0, rply, SWEMU_RSZ(rply), 0, 0, "athread_dma_iput")
#define athread_dma_iget_stride(dst, src, len, bsize, stride, rply) \
    SWEMU_PDMA(1, dst, src, len, bsize, stride, rply, SWEMU_RSZ(rply), 0, 0, "athread_dma_iget_stride")
#define athread_dma_iput_stride(dst, src, len, bsize, stride, rply) \
    SWEMU_PDMA(0, dst, src, len, bsize, stride, rply, SWEMU_RSZ(rply), 0, 0, "athread_dma_iput_stride")
#define athread_dma_wait_value(rply, value) \
    swemu_wait_value((const volatile void *)(rply), SWEMU_RSZ(rply), (long)(value), "athread_dma_wait_value")
/* broadcast gets: the issuer fetches into its own dst, then the data is
 * delivered to dst of every CPE of the group (issuer included); rply is
 * incremented on every receiving CPE (same LDM address). */
#define athread_dma_ibcast(dst, src, len, rply) \
    SWEMU_PDMA(1, dst, src, len, 0, 0, rply, SWEMU_RSZ(rply), 1, 0, "athread_dma_ibcast")
#define athread_dma_ibcast_stride(dst, src, len, bsize, stride, rply) \
    SWEMU_PDMA(1, dst, src, len, bsize, stride, rply, SWEMU_RSZ(rply), 1, 0, "athread_dma_ibcast_stride")
#define athread_dma_row_ibcast(dst, src, len, rply) \
    SWEMU_PDMA(1, dst, src, len, 0, 0, rply, SWEMU_RSZ(rply), 2, 0, "athread_dma_row_ibcast")
#define athread_dma_row_ibcast_stride(dst, src, len, bsize, stride, rply) \
    SWEMU_PDMA(1, dst, src, len, bsize, stride, rply, SWEMU_RSZ(rply), 2, 0, "athread_dma_row_ibcast_stride")
#define athread_dma_col_ibcast(dst, src, len, rply) \
    SWEMU_PDMA(1, dst, src, len, 0, 0, rply, SWEMU_RSZ(rply), 3, 0, "athread_dma_col_ibcast")
#define athread_dma_col_ibcast_stride(dst, src, len, bsize, stride, rply) \
    SWEMU_PDMA(1, dst, src, len, bsize, stride, rply, SWEMU_RSZ(rply), 3, 0, "athread_dma_col_ibcast_stride")
/* collective broadcasts: every member calls; CPE 0 / column 0 / row 0 issues */
#define athread_dma_bcast_coll(dst, src, len) \
    SWEMU_PDMA(1, dst, src, len, 0, 0, 0, 0, 1, 1, "athread_dma_bcast_coll")
#define athread_dma_bcast_stride_coll(dst, src, len, bsize, stride) \
    SWEMU_PDMA(1, dst, src, len, bsize, stride, 0, 0, 1, 1, "athread_dma_bcast_stride_coll")
#define athread_dma_row_bcast_coll(dst, src, len) \
    SWEMU_PDMA(1, dst, src, len, 0, 0, 0, 0, 2, 1, "athread_dma_row_bcast_coll")
#define athread_dma_row_bcast_stride_coll(dst, src, len, bsize, stride) \
    SWEMU_PDMA(1, dst, src, len, bsize, stride, 0, 0, 2, 1, "athread_dma_row_bcast_stride_coll")
#define athread_dma_col_bcast_coll(dst, src, len) \
    SWEMU_PDMA(1, dst, src, len, 0, 0, 0, 0, 3, 1, "athread_dma_col_bcast_coll")
#define athread_dma_col_bcast_stride_coll(dst, src, len, bsize, stride) \
    SWEMU_PDMA(1, dst, src, len, bsize, stride, 0, 0, 3, 1, "athread_dma_col_bcast_stride_coll")
#define athread_dma_barrier()     (0)
#define athread_dma_all_barrier() (0)

/* -- RMA between CPE LDMs.  Remote addresses are LDM addresses: the address
 * of a variable in the issuer names the same variable in the target CPE. -- */
#define SWEMU_PRMA(k, la, lr, lrs, len, tid, ra, rr, rrs, mask, name)          \
    swemu_rma((k), (void *)(la), (void *)(lr), (lrs), (long)(len), (int)(tid), \
              (void *)(ra), (void *)(rr), (rrs), (unsigned)(mask), (name))

#define athread_rma_put(laddr, len, rtid, raddr, rrply) \
    SWEMU_PRMA(SWEMU_RMA_PUT, laddr, 0, 0, len, rtid, raddr, rrply, SWEMU_RSZ(rrply), 0, "athread_rma_put")
#define athread_rma_iput(laddr, lrply, len, rtid, raddr, rrply) \
    SWEMU_PRMA(SWEMU_RMA_PUT, laddr, lrply, SWEMU_RSZ(lrply), len, rtid, raddr, rrply, SWEMU_RSZ(rrply), 0, "athread_rma_iput")
#define athread_rma_get(laddr, len, rtid, raddr, rrply) \
    SWEMU_PRMA(SWEMU_RMA_GET, laddr, 0, 0, len, rtid, raddr, rrply, SWEMU_RSZ(rrply), 0, "athread_rma_get")
#define athread_rma_iget(laddr, lrply, len, rtid, raddr, rrply) \
    SWEMU_PRMA(SWEMU_RMA_GET, laddr, lrply, SWEMU_RSZ(lrply), len, rtid, raddr, rrply, SWEMU_RSZ(rrply), 0, "athread_rma_iget")
#define athread_rma_wait_value(rply, value) \
    swemu_wait_value((const volatile void *)(rply), SWEMU_RSZ(rply), (long)(value), "athread_rma_wait_value")
/* broadcasts: (dst, src, ...); the issuer also receives (as in crts.h) */
#define athread_rma_bcast(dst, src, len, rrply) \
    SWEMU_PRMA(SWEMU_RMA_BCAST, src, 0, 0, len, -1, dst, rrply, SWEMU_RSZ(rrply), 0, "athread_rma_bcast")
/* note the crts.h argument order: (dst, src, l_rply, len, r_rply) */
#define athread_rma_ibcast(dst, src, lrply, len, rrply) \
    SWEMU_PRMA(SWEMU_RMA_BCAST, src, lrply, SWEMU_RSZ(lrply), len, -1, dst, rrply, SWEMU_RSZ(rrply), 0, "athread_rma_ibcast")
#define athread_rma_bcast_coll(dst, src, len, root) \
    SWEMU_PRMA(SWEMU_RMA_BCAST_COLL, src, 0, 0, len, -1, dst, 0, 0, root, "athread_rma_bcast_coll")
/* the mesh-row and mesh-column families, side by side: broadcast (issuer included), collective (root
 * = the column / row given), multicast to the rows / columns in the mask (issuer excluded) */
#define SWEMU_LINE_(kind, dst, src, len, lrply, mask, rrply, name) \
    SWEMU_PRMA(kind, src, lrply, SWEMU_RSZ(lrply), len, -1, dst, rrply, SWEMU_RSZ(rrply), mask, name)
#define athread_rma_row_bcast(dst, src, len, rrply) \
    SWEMU_LINE_(SWEMU_RMA_ROW_BCAST, dst, src, len, 0, 0, rrply, "athread_rma_row_bcast")
#define athread_rma_col_bcast(dst, src, len, rrply) \
    SWEMU_LINE_(SWEMU_RMA_COL_BCAST, dst, src, len, 0, 0, rrply, "athread_rma_col_bcast")
#define athread_rma_row_ibcast(dst, src, len, lrply, rrply) \
    SWEMU_LINE_(SWEMU_RMA_ROW_BCAST, dst, src, len, lrply, 0, rrply, "athread_rma_row_ibcast")
#define athread_rma_col_ibcast(dst, src, len, lrply, rrply) \
    SWEMU_LINE_(SWEMU_RMA_COL_BCAST, dst, src, len, lrply, 0, rrply, "athread_rma_col_ibcast")
#define athread_rma_row_bcast_coll(dst, src, len, root) \
    SWEMU_LINE_(SWEMU_RMA_ROW_BCAST_COLL, dst, src, len, 0, root, 0, "athread_rma_row_bcast_coll")
#define athread_rma_col_bcast_coll(dst, src, len, root) \
    SWEMU_LINE_(SWEMU_RMA_COL_BCAST_COLL, dst, src, len, 0, root, 0, "athread_rma_col_bcast_coll")
#define athread_rma_row_mcast(dst, src, len, rows_mask, rrply) \
    SWEMU_LINE_(SWEMU_RMA_ROW_MCAST, dst, src, len, 0, rows_mask, rrply, "athread_rma_row_mcast")
#define athread_rma_col_mcast(dst, src, len, cols_mask, rrply) \
    SWEMU_LINE_(SWEMU_RMA_COL_MCAST, dst, src, len, 0, cols_mask, rrply, "athread_rma_col_mcast")
#define athread_rma_row_imcast(dst, src, len, lrply, rows_mask, rrply) \
    SWEMU_LINE_(SWEMU_RMA_ROW_MCAST, dst, src, len, lrply, rows_mask, rrply, "athread_rma_row_imcast")
#define athread_rma_col_imcast(dst, src, len, lrply, cols_mask, rrply) \
    SWEMU_LINE_(SWEMU_RMA_COL_MCAST, dst, src, len, lrply, cols_mask, rrply, "athread_rma_col_imcast")
#define athread_rma_barrier()     (0)
#define athread_rma_all_barrier() (0)

/* CRTS_* spellings of the same calls */
#define CRTS_dma_get            athread_dma_get
#define CRTS_dma_put            athread_dma_put
#define CRTS_dma_get_stride     athread_dma_get_stride
#define CRTS_dma_put_stride     athread_dma_put_stride
#define CRTS_dma_iget           athread_dma_iget
#define CRTS_dma_iput           athread_dma_iput
#define CRTS_dma_iget_stride    athread_dma_iget_stride
#define CRTS_dma_iput_stride    athread_dma_iput_stride
#define CRTS_dma_wait_value     athread_dma_wait_value
#define CRTS_dma_ibcast         athread_dma_ibcast
#define CRTS_dma_row_ibcast     athread_dma_row_ibcast
#define CRTS_dma_col_ibcast     athread_dma_col_ibcast
#define CRTS_dma_bcast_coll     athread_dma_bcast_coll
#define CRTS_dma_row_bcast_coll athread_dma_row_bcast_coll
#define CRTS_dma_col_bcast_coll athread_dma_col_bcast_coll
#define CRTS_dma_barrier        athread_dma_barrier
#define CRTS_rma_get            athread_rma_get
#define CRTS_rma_iget           athread_rma_iget
#define CRTS_rma_put            athread_rma_put
#define CRTS_rma_iput           athread_rma_iput
#define CRTS_rma_wait_value     athread_rma_wait_value
#define CRTS_rma_bcast          athread_rma_bcast
#define CRTS_rma_ibcast         athread_rma_ibcast
#define CRTS_rma_row_bcast      athread_rma_row_bcast
#define CRTS_rma_row_ibcast     athread_rma_row_ibcast
#define CRTS_rma_col_bcast      athread_rma_col_bcast
#define CRTS_rma_col_ibcast     athread_rma_col_ibcast
#define CRTS_rma_barrier        athread_rma_barrier

#ifdef __cplusplus
}
#endif

#endif /* SWEMU_SLAVE_H */
