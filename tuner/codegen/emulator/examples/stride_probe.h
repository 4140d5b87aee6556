#ifndef STRIDE_PROBE_H
#define STRIDE_PROBE_H
/* CPE 0 only.  src: 256 bytes, src[i] = i.
 *  1. athread_get(PE_MODE, src+3, ldm, 40, .., stride=5, bsize=8)  then a
 *     contiguous athread_put of the 40 LDM bytes to out1
 *  2. athread_put(PE_MODE, ldm, out2+5, 40, .., stride=20, bsize=12)
 *  3. athread_dma_get_stride(ldm2, src+3, 40, 8, 5), athread_dma_put(out3, ldm2, 40)
 *  4. athread_dma_put_stride(out4+5, ldm, 40, 12, 20)
 * out1..out4 are 256 bytes, pre-filled with 0xEE. */
#define SP_SIZE 256
typedef struct { unsigned char *src, *out1, *out2, *out3, *out4; } sp_param;
#endif
