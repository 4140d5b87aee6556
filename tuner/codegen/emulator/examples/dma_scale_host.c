/* Host of the strided-DMA scale example: B[tile] = coef[0] * A[tile] for one
 * 4x8 tile per CPE, tile columns 8*(id%4) .. 8*(id%4)+7 of a 40-column
 * matrix.  Everything outside the tiles must keep its sentinel value.
 * usage: dma_scale [athread|desc]  (desc = the dma.h descriptor API) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <athread.h>
#include "dma_scale.h"

extern void SLAVE_FUN(ds_scale)(void *);
extern void SLAVE_FUN(ds_scale_desc)(void *);

int main(int argc, char **argv)
{
    int use_desc = argc > 1 && !strcmp(argv[1], "desc");
    athread_init();
    int ncpe = athread_get_max_threads();
    int m = 64 * DS_RB;
    double *a, *b, *coef;
    if (posix_memalign((void **)&a, 128, sizeof(double) * m * DS_N) ||
        posix_memalign((void **)&b, 128, sizeof(double) * m * DS_N) ||
        posix_memalign((void **)&coef, 128, sizeof(double) * 4))
        return 2;
    for (int i = 0; i < m * DS_N; i++) { a[i] = i + 1; b[i] = -1.0; }
    coef[0] = 2.5; coef[1] = coef[2] = coef[3] = 0;
    ds_param p = { a, b, coef, ncpe };
    if (use_desc) athread_spawn(ds_scale_desc, &p);
    else athread_spawn(ds_scale, &p);
    athread_join();
    athread_halt();
    int bad = 0;
    for (int r = 0; r < m; r++)
        for (int c = 0; c < DS_N; c++) {
            int id = r / DS_RB, c0 = 8 * (id % 4);
            int inside = id < ncpe && c >= c0 && c < c0 + DS_CB;
            double want = inside ? 2.5 * a[r * DS_N + c] : -1.0;
            if (b[r * DS_N + c] != want) {
                if (bad < 5) printf("mismatch at (%d,%d): %g != %g\n", r, c, b[r * DS_N + c], want);
                bad++;
            }
        }
    printf("%s %d mismatches\n", bad ? "FAIL" : "OK", bad);
    return bad ? 1 : 0;
}
