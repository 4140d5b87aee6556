/* 70000 B of __thread_local data: more than a 64 KiB LDM can hold. */
#include <slave.h>

__thread_local char big[70000];

void kernel(void *arg)
{
    (void)arg;
    for (int i = 0; i < (int)sizeof big; i += 4096) big[i] = (char)i;
}
