/* Host of the broadcast example: CPE 0 fetches one table with BCAST_MODE,
 * CPE (r,0) of every row fetches that row's table with ROW_MODE; after a
 * barrier every CPE checksums what arrived in its own LDM. */
#include <stdio.h>
#include <stdlib.h>
#include <athread.h>
#include "bcast.h"

extern void SLAVE_FUN(bc_kernel)(void *);

int main(void)
{
    static double table[BC_N] __attribute__((aligned(128)));
    static double rowtab[8 * BC_RN] __attribute__((aligned(128)));
    static double out[64 * 4] __attribute__((aligned(128)));
    double sum = 0, rsum[8] = {0};
    for (int i = 0; i < BC_N; i++) { table[i] = 0.5 * i + 1; sum += table[i]; }
    for (int i = 0; i < 8 * BC_RN; i++) { rowtab[i] = i * i; rsum[i / BC_RN] += rowtab[i]; }
    bc_param p = { table, rowtab, out };
    athread_init();
    int ncpe = athread_get_max_threads();
    athread_spawn(bc_kernel, &p);
    athread_join();
    athread_halt();
    int bad = 0;
    for (int id = 0; id < ncpe; id++) {
        double *o = &out[4 * id];
        if (o[0] != sum * (id + 1) || o[1] != rsum[id / 8] || o[2] != id) {
            if (bad < 5) printf("CPE %d: got %g %g %g want %g %g %d\n", id, o[0], o[1], o[2],
                                sum * (id + 1), rsum[id / 8], id);
            bad++;
        }
    }
    printf("%s %d bad CPEs\n", bad ? "FAIL" : "OK", bad);
    return bad ? 1 : 0;
}
