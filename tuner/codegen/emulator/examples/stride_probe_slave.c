#include <slave.h>
#include "stride_probe.h"

__thread_local unsigned char ldm[64] __attribute__((aligned(64)));
__thread_local unsigned char ldm2[64] __attribute__((aligned(64)));
__thread_local volatile int reply;

void sp_kernel(void *arg)
{
    if (_MYID != 0) return;
    sp_param p;
    reply = 0;
    athread_get(PE_MODE, arg, &p, sizeof p, (void *)&reply, 0, 0, 0);
    while (reply != 1);
    athread_get(PE_MODE, p.src + 3, ldm, 40, (void *)&reply, 0, 5, 8);
    while (reply != 2);
    athread_put(PE_MODE, ldm, p.out1, 40, (void *)&reply, 0, 0);
    athread_put(PE_MODE, ldm, p.out2 + 5, 40, (void *)&reply, 20, 12);
    while (reply != 4);
    athread_dma_get_stride(ldm2, p.src + 3, 40, 8, 5);
    athread_dma_put(p.out3, ldm2, 40);
    athread_dma_put_stride(p.out4 + 5, ldm, 40, 12, 20);
}
