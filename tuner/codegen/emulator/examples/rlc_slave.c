#include <slave.h>
#include <simd.h>
#include "rlc.h"

__thread_local double res[8] __attribute__((aligned(32)));
__thread_local volatile int reply;

void rlc_kernel(void *arg)
{
    rlc_param p = *(rlc_param *)arg;
    int id = _MYID, row = _ROW, col = _COL;
    double v = id + 1;
    doublev4 mine = simd_set_doublev4(v, 2 * v, 3 * v, 4 * v), acc = mine, t;

    /* row all-reduce: column k broadcasts along the row, the others receive */
    for (int k = 0; k < 8; k++) {
        if (col == k) simd_putr(mine, 8);
        else { t = simd_getr(t); acc = simd_vaddd(acc, t); }
    }
    simd_store(acc, &res[0]);
    /* messages carry no tag: all CPEs of the row must have drained this
     * phase before anyone starts the next phase on the row bus */
    athread_syn(ROW_SCOPE, 0xff);

    /* column all-reduce */
    acc = mine;
    for (int k = 0; k < 8; k++) {
        if (row == k) simd_putc(mine, 8);
        else { t = simd_getc(t); acc = acc + t; }
    }
    res[4] = acc[0];

    /* point-to-point ring along the row */
    simd_putr(mine, (col + 1) % 8);
    t = simd_getr(t);
    res[5] = t[0];
    athread_syn(ROW_SCOPE, 0xff);

    /* intv8 row broadcast from column 0: lanes row*8 + 0..7 */
    intv8 iv;
    if (col == 0) {
        iv = simd_set_intv8(row * 8, row * 8 + 1, row * 8 + 2, row * 8 + 3,
                            row * 8 + 4, row * 8 + 5, row * 8 + 6, row * 8 + 7);
        simd_putr(iv, 8);
    } else {
        iv = simd_getr(iv);
    }
    int s = 0;
    for (int k = 0; k < 8; k++) s += iv[k];
    res[6] = s;
    res[7] = 0;

    athread_syn(ROW_SCOPE, 0xff);
    reply = 0;
    athread_put(PE_MODE, res, p.out + 8 * id, sizeof res, (void *)&reply, 0, 0);
    while (reply != 1);
}
