/* Slave of the strided-DMA scale example (SW26010 API). */
#include <slave.h>
#include <simd.h>
#include <dma.h>
#include "dma_scale.h"

__thread_local double tile[DS_RB * DS_CB] __attribute__((aligned(32)));
__thread_local double coef_ldm[4] __attribute__((aligned(32)));
__thread_local volatile int get_reply, put_reply;

static void scale(double *t)
{
    doublev4 c, v;
    simd_loade(c, &coef_ldm[0]);
    for (int i = 0; i < DS_RB * DS_CB; i += 4) {
        simd_load(v, &t[i]);
        v = simd_vmuld(v, c);
        simd_store(v, &t[i]);
    }
}

/* athread_get/put with stride (gap) and bsize */
void ds_scale(void *arg)
{
    ds_param p = *(ds_param *)arg;
    int id = athread_get_id(-1);
    long off = (long)id * DS_RB * DS_N + 8 * (id % 4);
    get_reply = 0;
    put_reply = 0;
    athread_get(PE_MODE, p.coef, coef_ldm, 4 * sizeof(double), (void *)&get_reply, 0, 0, 0);
    athread_get(PE_MODE, p.a + off, tile, DS_RB * DS_CB * sizeof(double), (void *)&get_reply, 0,
                (DS_N - DS_CB) * sizeof(double), DS_CB * sizeof(double));
    while (get_reply != 2);
    scale(tile);
    athread_put(PE_MODE, tile, p.b + off, DS_RB * DS_CB * sizeof(double), (void *)&put_reply,
                (DS_N - DS_CB) * sizeof(double), DS_CB * sizeof(double));
    while (put_reply != 1);
}

/* the same with the dma.h descriptor API and an ldm_malloc'd tile */
void ds_scale_desc(void *arg)
{
    ds_param p = *(ds_param *)arg;
    int id = _MYID;
    long off = (long)id * DS_RB * DS_N + 8 * (id % 4);
    double *buf = (double *)ldm_malloc(DS_RB * DS_CB * sizeof(double));
    volatile int reply = 0;
    dma_desc d = 0;
    dma_set_op(&d, DMA_GET);
    dma_set_mode(&d, PE_MODE);
    dma_set_reply(&d, &reply);
    dma_set_size(&d, 4 * sizeof(double));
    dma(d, (long)p.coef, (long)coef_ldm);
    dma_set_size(&d, DS_RB * DS_CB * sizeof(double));
    dma_set_bsize(&d, DS_CB * sizeof(double));
    dma_set_stepsize(&d, (DS_N - DS_CB) * sizeof(double));
    dma(d, (long)(p.a + off), (long)buf);
    dma_wait(&reply, 2);
    scale(buf);
    dma_set_op(&d, DMA_PUT);
    dma(d, (long)(p.b + off), (long)buf);
    dma_wait(&reply, 3);
    ldm_free(buf, DS_RB * DS_CB * sizeof(double));
}
