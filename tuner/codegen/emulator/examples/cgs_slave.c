/* Slave of the whole-chip example: each CPE of CG g scales its slice of CG g's part by g + 1 and adds
 * its id; CPE 0 of CG g also issues g extra 4-byte gets, so each CG's DMA count is its own. */
#include <slave.h>
#include "cgs.h"

__thread_local float buf[CGS_B];

void cgs_kernel(void *arg)
{
    cgs_param *p = (cgs_param *)arg + _CGN;
    volatile int reply = 0;
    int n = 0;
    athread_get(PE_MODE, p->x + _MYID * CGS_B, buf, sizeof buf, (void *)&reply, 0, 0, 0);
    n++;
    if (_MYID == 0)
        for (int k = 0; k < _CGN; k++, n++)
            athread_get(PE_MODE, p->x, buf, 4, (void *)&reply, 0, 0, 0);
    while (reply != n);
    athread_get(PE_MODE, p->x + _MYID * CGS_B, buf, sizeof buf, (void *)&reply, 0, 0, 0);  /* the slice again */
    while (reply != ++n);
    for (int i = 0; i < CGS_B; i++) buf[i] = buf[i] * (float)(_CGN + 1) + (float)_MYID;
    reply = 0;
    athread_put(PE_MODE, buf, p->y + _MYID * CGS_B, sizeof buf, (void *)&reply, 0, 0);
    while (reply != 1);
}
