/*
 * dma.h - swemu replacement for the SW26010 low-level DMA descriptor API
 * ("DMA intrinsic in SW-3A").
 *
 *     dma_desc d = 0;
 *     dma_set_op(&d, DMA_GET); dma_set_mode(&d, PE_MODE);
 *     dma_set_size(&d, bytes); dma_set_bsize(&d, blk); dma_set_stepsize(&d, gap);
 *     dma_set_mask(&d, rows); dma_set_reply(&d, &reply);
 *     dma(d, (long)mem, (long)ldm);          // completes immediately, reply += 1
 *     dma_wait(&reply, n);
 *
 * The descriptor is a 128-bit integer (so `dma_desc d = 0;` stays valid):
 *   bits 0-3 op, 4-7 mode, 8-31 size (24 bit), 32-51 bsize (20 bit),
 *   52-59 mask, 60-75 reply slot, 76-107 stepsize (32 bit).
 * The reply slot indexes a per-CPE table of reply-word addresses (the real
 * descriptor holds a 16-bit LDM address, which cannot hold an x86 pointer).
 */
#ifndef SWEMU_DMA_H
#define SWEMU_DMA_H

#include "slave.h"

typedef unsigned __int128 dma_desc;

static inline void swemu_desc_field(dma_desc *d, int lo, int bits, unsigned long v)
{
    dma_desc m = (((dma_desc)1 << bits) - 1) << lo;
    *d = (*d & ~m) | (((dma_desc)v << lo) & m);
}
static inline unsigned long swemu_desc_get(dma_desc d, int lo, int bits)
{
    return (unsigned long)((d >> lo) & (((dma_desc)1 << bits) - 1));
}

#define dma_set_op(d, op)        swemu_desc_field((d), 0, 4, (unsigned long)(op))
#define dma_set_mode(d, mode)    swemu_desc_field((d), 4, 4, (unsigned long)(mode))
#define dma_set_size(d, size)    swemu_desc_field((d), 8, 24, (unsigned long)(size))
#define dma_set_bsize(d, bsize)  swemu_desc_field((d), 32, 20, (unsigned long)(bsize))
#define dma_set_mask(d, mask)    swemu_desc_field((d), 52, 8, (unsigned long)(mask))
#define dma_set_reply(d, reply)  swemu_desc_field((d), 60, 16, (unsigned long)swemu_reply_index((void *)(reply)))
#define dma_set_stepsize(d, gap) swemu_desc_field((d), 76, 32, (unsigned long)(gap))

static inline int dma(dma_desc d, long mem, long ldm)
{
    return swemu_desc_dma((int)swemu_desc_get(d, 0, 4), (int)swemu_desc_get(d, 4, 4),
                          (long)swemu_desc_get(d, 8, 24), (long)swemu_desc_get(d, 32, 20),
                          (long)swemu_desc_get(d, 76, 32), (int)swemu_desc_get(d, 52, 8),
                          (int)swemu_desc_get(d, 60, 16), mem, ldm);
}

#define dma_wait(reply, count)                                                 \
    swemu_wait_value((const volatile void *)(reply), 4, (long)(count), "dma_wait")
#define dma_barrier() ((void)0)

#endif /* SWEMU_DMA_H */
