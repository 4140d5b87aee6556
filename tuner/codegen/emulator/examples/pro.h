#ifndef PRO_H
#define PRO_H
#define PK  24   /* columns of A and Y (floats)                         */
#define PRB 2    /* rows per CPE                                        */
#define PCB 8    /* tile columns: 8*(id%3) .. 8*(id%3)+7                */
typedef struct {
    float *a, *y;     /* (64*PRB) x PK row-major                         */
    float *x;         /* 8 floats, broadcast to every CPE by CPE 0        */
    float *z;         /* 64 x 4: [tile sum of CPE (row,0), tile sum of CPE id+1, id, 0] */
} pro_param;
#endif
