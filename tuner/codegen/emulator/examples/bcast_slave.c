#include <slave.h>
#include "bcast.h"

__thread_local double buf[BC_N] __attribute__((aligned(32)));
__thread_local double rbuf[BC_RN] __attribute__((aligned(32)));
__thread_local double res[4] __attribute__((aligned(32)));
__thread_local volatile int reply;

void bc_kernel(void *arg)
{
    bc_param *pp = (bc_param *)arg;
    bc_param p;
    reply = 0;
    /* the parameter block itself is in main memory: fetch it by DMA */
    athread_get(PE_MODE, pp, &p, sizeof p, (void *)&reply, 0, 0, 0);
    while (reply != 1);
    for (int i = 0; i < BC_N; i++) buf[i] = -1;
    for (int i = 0; i < BC_RN; i++) rbuf[i] = -1;
    athread_syn(ARRAY_SCOPE, 0xffff);          /* nobody may be overwritten early */
    if (_MYID == 0) {
        athread_get(BCAST_MODE, p.table, buf, BC_N * sizeof(double), (void *)&reply, 0xff, 0, 0);
        while (reply != 2);
    }
    if (_COL == 0) {
        int want = _MYID == 0 ? 3 : 2;
        athread_get(ROW_MODE, p.rowtab + _ROW * BC_RN, rbuf, BC_RN * sizeof(double),
                    (void *)&reply, 0, 0, 0);
        while (reply != want);
    }
    athread_syn(ARRAY_SCOPE, 0xffff);
    double s = 0, r = 0;
    for (int i = 0; i < BC_N; i++) s += buf[i];
    for (int i = 0; i < BC_RN; i++) r += rbuf[i];
    res[0] = s * (_MYID + 1);
    res[1] = r;
    res[2] = _MYID;
    res[3] = 0;
    int before = reply;
    athread_put(PE_MODE, res, p.out + 4 * _MYID, sizeof res, (void *)&reply, 0, 0);
    while (reply != before + 1);
}
