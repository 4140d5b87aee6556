/* Generic host: runs the slave function `kernel` once on all CPEs.
 * Prints "done" when the kernel returned normally. */
#include <stdio.h>
#include <athread.h>

extern void SLAVE_FUN(kernel)(void *);

int main(void)
{
    static long arg[8] __attribute__((aligned(128))) = { 1, 2, 3, 4, 5, 6, 7, 8 };
    athread_init();
    athread_spawn(kernel, arg);
    athread_join();
    athread_halt();
    printf("done\n");
    return 0;
}
