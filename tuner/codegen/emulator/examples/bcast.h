#ifndef BCAST_H
#define BCAST_H
#define BC_N 256   /* doubles in the broadcast table (2 KiB)  */
#define BC_RN 16   /* doubles per row table (128 B)           */
typedef struct {
    double *table;     /* BC_N doubles, broadcast by CPE 0 with BCAST_MODE      */
    double *rowtab;    /* 8 x BC_RN doubles, row r fetched by CPE (r,0), ROW_MODE */
    double *out;       /* 64 x 4 doubles: [sum(table)*(id+1), sum(rowtab[row]), id, 0] */
} bc_param;
#endif
