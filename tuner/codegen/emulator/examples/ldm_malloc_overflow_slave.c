/* Two 40000 B ldm_malloc blocks: the second exceeds a 64 KiB LDM. */
#include <slave.h>

__thread_local double small[16];

void kernel(void *arg)
{
    (void)arg;
    char *a = ldm_malloc(40000);
    a[0] = 1;
    small[0] = a[0];
    char *b = ldm_malloc(40000);   /* -> ldm_overflow */
    b[0] = 2;
    ldm_free(b, 40000);
    ldm_free(a, 40000);
}
