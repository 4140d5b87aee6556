/* Bug: CPE 9 waits for a row message nobody sends.  With SWEMU_TIMEOUT the
 * emulator reports a `timeout` error naming CPE 9 and where it waits. */
#include <slave.h>
#include <simd.h>

__thread_local double out[4];

void kernel(void *arg)
{
    (void)arg;
    doublev4 v = simd_set_doublev4(0, 0, 0, 0);
    if (_MYID == 9) v = simd_getr(v);
    out[0] = v[0];
}
