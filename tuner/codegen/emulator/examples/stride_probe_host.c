#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <athread.h>
#include "stride_probe.h"

extern void SLAVE_FUN(sp_kernel)(void *);

static void dump(const char *name, const unsigned char *p)
{
    printf("%s ", name);
    for (int i = 0; i < SP_SIZE; i++) printf("%02x", p[i]);
    printf("\n");
}

int main(void)
{
    unsigned char *buf[5];
    for (int k = 0; k < 5; k++)
        if (posix_memalign((void **)&buf[k], 128, SP_SIZE)) return 2;
    for (int i = 0; i < SP_SIZE; i++) buf[0][i] = (unsigned char)i;
    for (int k = 1; k < 5; k++) memset(buf[k], 0xEE, SP_SIZE);
    static sp_param p __attribute__((aligned(128)));   /* 1 line for the test's count */
    p = (sp_param){ buf[0], buf[1], buf[2], buf[3], buf[4] };
    athread_init();
    athread_spawn(sp_kernel, &p);
    athread_join();
    athread_halt();
    dump("out1", buf[1]);
    dump("out2", buf[2]);
    dump("out3", buf[3]);
    dump("out4", buf[4]);
    return 0;
}
