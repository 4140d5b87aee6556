/* Shared by cgs_host.c and cgs_slave.c: one kernel on every core group of the chip. */
#ifndef CGS_H
#define CGS_H
#define CGS_B 16        /* floats per CPE */
#define CGS_MAX 6       /* core groups of an SW26010-Pro */
typedef struct { float *x, *y; } cgs_param;   /* one per core group, indexed by _CGN */
#endif
