/* shared by dma_scale_host.c and dma_scale_slave.c */
#ifndef DMA_SCALE_H
#define DMA_SCALE_H
#define DS_N   40   /* columns of the row-major matrices A and B            */
#define DS_RB  4    /* rows per CPE                                          */
#define DS_CB  8    /* columns per CPE: the tile starts at column 8*(id%4)   */
typedef struct {
    double *a, *b;      /* M x N, M = 64 * DS_RB                             */
    double *coef;       /* 4 doubles; b = coef[0] * a                        */
    int ncpe;
} ds_param;
#endif
