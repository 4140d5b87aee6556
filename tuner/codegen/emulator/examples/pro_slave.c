/* SW26010-Pro slave: athread_dma_* (dst, src, ...) and athread_rma_*. */
#include <slave.h>
#include <simd.h>
#include "pro.h"

__thread_local float tile[PRB * PCB] __attribute__((aligned(64)));
__thread_local float xv[8] __attribute__((aligned(64)));
__thread_local float mine[4] __attribute__((aligned(64)));
__thread_local float rec[4] __attribute__((aligned(64)));
__thread_local athread_rply_t rply, xrply;

void pro_kernel(void *arg)
{
    pro_param p;
    athread_dma_get(&p, arg, sizeof p);                  /* blocking get */
    int id = _PEN, row = _ROW, col = _COL;
    long off = (long)id * PRB * PK + 8 * (id % 3);

    rply = 0;
    xrply = 0;
    volatile athread_rply_t rrply = 0, lrply = 0;        /* stack words, same offset on every CPE */
    float *rowval = (float *)ldm_malloc(4 * sizeof(float));
    athread_ssync_array();                               /* replies are zero everywhere */

    athread_dma_iget_stride(tile, p.a + off, sizeof tile, PCB * sizeof(float),
                            (PK - PCB) * sizeof(float), &rply);
    if (id == 0) athread_dma_ibcast(xv, p.x, sizeof xv, &xrply);
    athread_dma_wait_value(&rply, 1);
    athread_dma_wait_value(&xrply, 1);                   /* bumped on every receiver */

    floatv8 xx, t;
    simd_load(xx, xv);
    float s = 0;
    for (int i = 0; i < PRB; i++) {
        simd_load(t, &tile[i * PCB]);
        t = simd_vmuls(t, xx);
        simd_store(t, &tile[i * PCB]);
        for (int j = 0; j < PCB; j++) s += t[j];
    }
    athread_dma_put_stride(p.y + off, tile, sizeof tile, PCB * sizeof(float),
                           (PK - PCB) * sizeof(float));

    mine[0] = s; mine[1] = mine[2] = mine[3] = 0;
    /* column 0 broadcasts its sum along the row into the ldm_malloc'd buffer */
    if (col == 0) {
        athread_rma_row_ibcast(rowval, mine, sizeof mine, &lrply, &rrply);
        athread_rma_wait_value(&lrply, 1);
    }
    athread_rma_wait_value(&rrply, 1);
    athread_ssync_array();                               /* every `mine` is final */
    athread_rma_get(&rec[1], sizeof(float), (id + 1) % 64, &mine[0], &rrply);
    athread_ssync_array();

    rec[0] = rowval[0];
    rec[2] = (float)id;
    rec[3] = 0;
    athread_dma_put(p.z + 4 * id, rec, sizeof rec);
    ldm_free(rowval, 4 * sizeof(float));
    (void)row;
}
