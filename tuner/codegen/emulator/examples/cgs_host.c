/* Host of the whole-chip example (SWEMU_CGS core groups): -DCGS_PRO spawns with athread_spawn_cgs
 * (SW26010-Pro all-shared mode); without it, swDNN's SW26010 form: one host pthread per CG, each
 * calling athread_init then athread_spawn on its own CG, started one after another. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <athread.h>
#include "cgs.h"

extern void SLAVE_FUN(cgs_kernel)(void *);

static cgs_param P[CGS_MAX];
#ifndef CGS_PRO
static sem_t bound;  /* a CG's thread has called athread_init: the next may start */

static void *cg_thread(void *arg)
{
    (void)arg;
    athread_init();
    sem_post(&bound);
    athread_spawn(cgs_kernel, P);
    athread_join();
    return NULL;
}
#endif

int main(int argc, char **argv)
{
    int cgs = argc > 1 ? atoi(argv[1]) : 1;
    int n = 64 * CGS_B;
    for (int g = 0; g < cgs; g++) {
        P[g].x = malloc_cross(sizeof(float) * n);
        P[g].y = malloc_cross(sizeof(float) * n);
        for (int i = 0; i < n; i++) { P[g].x[i] = (float)(i % 7 + g); P[g].y[i] = -1.0f; }
    }
#ifdef CGS_PRO
    athread_init_cgs();
    athread_spawn_cgs(cgs_kernel, P);
    athread_join_cgs();
#else
    pthread_t th[CGS_MAX];
    sem_init(&bound, 0, 0);
    for (int g = 0; g < cgs; g++) {
        pthread_create(&th[g], NULL, cg_thread, NULL);
        sem_wait(&bound);
    }
    for (int g = 0; g < cgs; g++) pthread_join(th[g], NULL);
#endif
    athread_halt();
    int bad = 0;
    for (int g = 0; g < cgs; g++)
        for (int i = 0; i < n; i++) {
            float want = P[g].x[i] * (float)(g + 1) + (float)(i / CGS_B);
            if (P[g].y[i] != want) { if (bad < 5) printf("cg %d y[%d] = %g != %g\n", g, i, P[g].y[i], want); bad++; }
        }
    printf("%s %d mismatches\n", bad ? "FAIL" : "OK", bad);
    return bad ? 1 : 0;
}
