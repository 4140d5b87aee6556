/* Host of the 8x8 register-communication example.  CPE (r,c) holds
 * v = id+1 (lanes v, 2v, 3v, 4v).  Row sums through simd_putr(v, 8) /
 * simd_getr, column sums through simd_putc(v, 8) / simd_getc, and a
 * point-to-point ring shift simd_putr(v, (c+1)%8). */
#include <stdio.h>
#include <athread.h>
#include "rlc.h"

extern void SLAVE_FUN(rlc_kernel)(void *);

int main(void)
{
    static double out[64 * 8] __attribute__((aligned(128)));
    rlc_param p = { out };
    athread_init();
    athread_spawn(rlc_kernel, &p);
    athread_join();
    athread_halt();
    int bad = 0;
    for (int id = 0; id < 64; id++) {
        int r = id / 8, c = id % 8;
        double rs = 0, cs = 0;
        for (int k = 0; k < 8; k++) { rs += r * 8 + k + 1; cs += k * 8 + c + 1; }
        double left = r * 8 + (c + 7) % 8 + 1;
        double *o = &out[id * 8];
        int ok = o[0] == rs && o[1] == 2 * rs && o[2] == 3 * rs && o[3] == 4 * rs &&
                 o[4] == cs && o[5] == left && o[6] == 8 * (r * 8) + 28;
        if (!ok) {
            if (bad < 5) printf("CPE %d: %g %g %g %g %g %g %g\n", id, o[0], o[1], o[2], o[3], o[4], o[5], o[6]);
            bad++;
        }
    }
    printf("%s %d bad CPEs\n", bad ? "FAIL" : "OK", bad);
    return bad ? 1 : 0;
}
