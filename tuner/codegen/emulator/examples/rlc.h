#ifndef RLC_H
#define RLC_H
/* out[id*8 + k]: 0..3 row sum (doublev4 lanes), 4 column sum (lane 0),
 * 5 value received from the left neighbour (ring), 6 intv8 row-broadcast check */
typedef struct { double *out; } rlc_param;
#endif
