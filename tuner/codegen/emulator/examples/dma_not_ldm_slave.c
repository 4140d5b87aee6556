/* Bug: the destination of athread_get is a main-memory array (a plain
 * global), not LDM.  CPE 5 makes the mistake. */
#include <slave.h>

double not_ldm[8];                 /* plain global = main memory */
__thread_local double ok_buf[8];
__thread_local volatile int reply;

void kernel(void *arg)
{
    long *src = (long *)arg;
    reply = 0;
    athread_get(PE_MODE, src, ok_buf, 64, (void *)&reply, 0, 0, 0);
    while (reply != 1);
    athread_syn(ARRAY_SCOPE, 0xffff);
    if (_MYID == 5) {
        athread_get(PE_MODE, src, not_ldm, 64, (void *)&reply, 0, 0, 0);
        while (reply != 2);
    }
}
