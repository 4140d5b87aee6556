/* Host of the SW26010-Pro example (run with SWEMU_TARGET=sw26010pro). */
#include <stdio.h>
#include <stdlib.h>
#include <athread.h>
#include "pro.h"

extern void SLAVE_FUN(pro_kernel)(void *);

int main(void)
{
    int m = 64 * PRB;
    float *a, *y, *x, *z;
    if (posix_memalign((void **)&a, 128, sizeof(float) * m * PK) ||
        posix_memalign((void **)&y, 128, sizeof(float) * m * PK) ||
        posix_memalign((void **)&x, 128, sizeof(float) * 8) ||
        posix_memalign((void **)&z, 128, sizeof(float) * 64 * 4))
        return 2;
    for (int i = 0; i < m * PK; i++) { a[i] = (float)(i % 97); y[i] = -1.0f; }
    for (int j = 0; j < 8; j++) x[j] = (float)(j + 1);
    pro_param p = { a, y, x, z };
    athread_init_cgs();
    athread_spawn_cgs(pro_kernel, &p);
    athread_join_cgs();
    athread_halt();
    int bad = 0;
    double tsum[64];
    for (int id = 0; id < 64; id++) {
        int c0 = 8 * (id % 3);
        tsum[id] = 0;
        for (int r = id * PRB; r < (id + 1) * PRB; r++)
            for (int j = 0; j < PCB; j++) tsum[id] += a[r * PK + c0 + j] * x[j];
    }
    for (int r = 0; r < m; r++)
        for (int c = 0; c < PK; c++) {
            int id = r / PRB, c0 = 8 * (id % 3);
            float want = (c >= c0 && c < c0 + PCB) ? a[r * PK + c] * x[c - c0] : -1.0f;
            if (y[r * PK + c] != want) { if (bad < 5) printf("y(%d,%d) = %g != %g\n", r, c, y[r * PK + c], want); bad++; }
        }
    for (int id = 0; id < 64; id++) {
        float *o = &z[4 * id];
        if (o[0] != (float)tsum[id / 8 * 8] || o[1] != (float)tsum[(id + 1) % 64] || o[2] != (float)id) {
            if (bad < 5) printf("z[%d] = %g %g %g\n", id, o[0], o[1], o[2]);
            bad++;
        }
    }
    printf("%s %d mismatches\n", bad ? "FAIL" : "OK", bad);
    return bad ? 1 : 0;
}
