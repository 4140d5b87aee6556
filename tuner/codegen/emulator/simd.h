/*
 * simd.h - swemu replacement for the Sunway simd.h (SW26010 256-bit and
 * SW26010-Pro 512-bit vector types and intrinsics, register communication).
 *
 * Vector types are GCC vector extensions.  All intrinsics are macros (no
 * function takes a vector by value, so no -Wpsabi noise without AVX).
 * Calling conventions follow the sw5cc simd.h:
 *     simd_load(v, p);  simd_store(v, p);  simd_loadu / simd_storeu / simd_loade(v, p)
 *     simd_putr(v, col);  simd_putc(v, row);   col/row == 8 -> broadcast
 *     v = simd_getr(v);   v = simd_getc(v);    (the argument only gives the type)
 */
#ifndef SWEMU_SIMD_H
#define SWEMU_SIMD_H

#include <stdio.h>
#include <string.h>
#include "swemu_common.h"

/* ---- SW26010 (256-bit registers) ---- */
typedef double   doublev4 __attribute__((vector_size(32)));
typedef float    floatv4  __attribute__((vector_size(16)));  /* 16 B in memory (vlds) */
typedef int      intv8    __attribute__((vector_size(32)));
typedef unsigned uintv8   __attribute__((vector_size(32)));
typedef long     int256   __attribute__((vector_size(32)));
typedef unsigned long uint256 __attribute__((vector_size(32)));
/* ---- SW26010-Pro (512-bit registers) ---- */
typedef double   doublev8 __attribute__((vector_size(64)));
typedef float    floatv8  __attribute__((vector_size(32)));
typedef int      intv16   __attribute__((vector_size(64)));
typedef unsigned uintv16  __attribute__((vector_size(64)));
typedef long     int512   __attribute__((vector_size(64)));
typedef unsigned long uint512 __attribute__((vector_size(64)));

#define SWEMU_RVAL_T(x) __typeof__((x) + 0)       /* drops qualifiers */
#define SWEMU_LANES(x) ((int)(sizeof(x) / sizeof((x)[0])))
#define SWEMU_ALIGN_NEED(x) ((int)(sizeof(x) > 32 ? 64 : sizeof(x)))
#define SWEMU_CHK_ALIGN(p, n)                                                  \
    do { if (((unsigned long)(p)) & ((unsigned long)(n) - 1))                  \
             swemu_simd_unaligned((const void *)(p), (n)); } while (0)

/* ---- set ---- */
#define simd_set_doublev4(a, b, c, d) ((doublev4){(a), (b), (c), (d)})
#define simd_set_floatv4(a, b, c, d)  ((floatv4){(a), (b), (c), (d)})
#define simd_set_intv8(a, b, c, d, e, f, g, h) ((intv8){(a), (b), (c), (d), (e), (f), (g), (h)})
#define simd_set_uintv8(a, b, c, d, e, f, g, h) ((uintv8){(a), (b), (c), (d), (e), (f), (g), (h)})
#define simd_set_int256(a, b, c, d)   ((int256){(a), (b), (c), (d)})
#define simd_set_uint256(a, b, c, d)  ((uint256){(a), (b), (c), (d)})
#define simd_set_doublev8(a, b, c, d, e, f, g, h) ((doublev8){(a), (b), (c), (d), (e), (f), (g), (h)})
#define simd_set_floatv8(a, b, c, d, e, f, g, h)  ((floatv8){(a), (b), (c), (d), (e), (f), (g), (h)})
#define simd_set_intv16(...)          ((intv16){__VA_ARGS__})

/* ---- load / store (macro form: the first argument is the register) ---- */
#define simd_load(x, y)                                                        \
    ({ SWEMU_CHK_ALIGN((y), SWEMU_ALIGN_NEED(x));                              \
       memcpy((void *)&(x), (const void *)(y), sizeof(x)); (x); })
#define simd_loadu(x, y)                                                       \
    ({ memcpy((void *)&(x), (const void *)(y), sizeof(x)); (x); })
#define simd_store(x, y)                                                       \
    ({ SWEMU_RVAL_T(x) swemu_st_ = (x);                                        \
       SWEMU_CHK_ALIGN((y), SWEMU_ALIGN_NEED(swemu_st_));                      \
       memcpy((void *)(y), &swemu_st_, sizeof(swemu_st_)); })
#define simd_storeu(x, y)                                                      \
    ({ SWEMU_RVAL_T(x) swemu_st_ = (x);                                        \
       memcpy((void *)(y), &swemu_st_, sizeof(swemu_st_)); })
/* load one element and replicate it into every lane */
#define simd_loade(x, y)                                                       \
    ({ __typeof__((x)[0]) swemu_e_ = *(y);                                     \
       (x) = ((SWEMU_RVAL_T(x)){0}) + swemu_e_; (x); })

/* ---- arithmetic (GCC vector operators; work for every vector type) ---- */
#define simd_vaddd(a, b) ((a) + (b))
#define simd_vsubd(a, b) ((a) - (b))
#define simd_vmuld(a, b) ((a) * (b))
#define simd_vdivd(a, b) ((a) / (b))
#define simd_vadds(a, b) ((a) + (b))
#define simd_vsubs(a, b) ((a) - (b))
#define simd_vmuls(a, b) ((a) * (b))
#define simd_vdivs(a, b) ((a) / (b))
#define simd_vmad(a, b, c)  ((a) * (b) + (c))
#define simd_vmsd(a, b, c)  ((a) * (b) - (c))
#define simd_vnmad(a, b, c) (-((a) * (b)) + (c))
#define simd_vnmsd(a, b, c) (-((a) * (b)) - (c))
#define simd_vmas(a, b, c)  ((a) * (b) + (c))
#define simd_vmss(a, b, c)  ((a) * (b) - (c))
#define simd_vnmas(a, b, c) (-((a) * (b)) + (c))
#define simd_vnmss(a, b, c) (-((a) * (b)) - (c))
#define simd_v4addd simd_vaddd
#define simd_v4subd simd_vsubd
#define simd_v4muld simd_vmuld
#define SWEMU_LANEWISE1(a, expr)                                               \
    ({ SWEMU_RVAL_T(a) swemu_a_ = (a), swemu_r_;                               \
       for (int swemu_i_ = 0; swemu_i_ < SWEMU_LANES(swemu_a_); swemu_i_++)    \
           swemu_r_[swemu_i_] = expr;                                          \
       swemu_r_; })
#define simd_vsqrtd(a) SWEMU_LANEWISE1(a, __builtin_sqrt(swemu_a_[swemu_i_]))
#define simd_vsqrts(a) SWEMU_LANEWISE1(a, __builtin_sqrtf(swemu_a_[swemu_i_]))
#define simd_vabsd(a)  SWEMU_LANEWISE1(a, __builtin_fabs(swemu_a_[swemu_i_]))
#define simd_vabss(a)  SWEMU_LANEWISE1(a, __builtin_fabsf(swemu_a_[swemu_i_]))
#define simd_vcpyf(a)  SWEMU_LANEWISE1(a, swemu_a_[0])
#define SWEMU_LANEWISE3(a, b, c, expr)                                         \
    ({ SWEMU_RVAL_T(a) swemu_a_ = (a); SWEMU_RVAL_T(b) swemu_b_ = (b);         \
       SWEMU_RVAL_T(c) swemu_c_ = (c), swemu_r_;                               \
       for (int swemu_i_ = 0; swemu_i_ < SWEMU_LANES(swemu_a_); swemu_i_++)    \
           swemu_r_[swemu_i_] = expr;                                          \
       swemu_r_; })
#define simd_vseleq(a, b, c) SWEMU_LANEWISE3(a, b, c, swemu_a_[swemu_i_] == 0 ? swemu_b_[swemu_i_] : swemu_c_[swemu_i_])
#define simd_vsellt(a, b, c) SWEMU_LANEWISE3(a, b, c, swemu_a_[swemu_i_] <  0 ? swemu_b_[swemu_i_] : swemu_c_[swemu_i_])
#define simd_vselle(a, b, c) SWEMU_LANEWISE3(a, b, c, swemu_a_[swemu_i_] <= 0 ? swemu_b_[swemu_i_] : swemu_c_[swemu_i_])
#define simd_vselne(a, b, c) SWEMU_LANEWISE3(a, b, c, swemu_a_[swemu_i_] != 0 ? swemu_b_[swemu_i_] : swemu_c_[swemu_i_])
#define simd_vselgt(a, b, c) SWEMU_LANEWISE3(a, b, c, swemu_a_[swemu_i_] >  0 ? swemu_b_[swemu_i_] : swemu_c_[swemu_i_])
#define simd_vselge(a, b, c) SWEMU_LANEWISE3(a, b, c, swemu_a_[swemu_i_] >= 0 ? swemu_b_[swemu_i_] : swemu_c_[swemu_i_])
#define SWEMU_FCMP(a, b, op)                                                   \
    ({ SWEMU_RVAL_T(a) swemu_a_ = (a), swemu_b_ = (b), swemu_r_;               \
       for (int swemu_i_ = 0; swemu_i_ < SWEMU_LANES(swemu_a_); swemu_i_++)    \
           swemu_r_[swemu_i_] = (swemu_a_[swemu_i_] op swemu_b_[swemu_i_]) ? 2.0 : 0.0; \
       swemu_r_; })
#define simd_vfcmpeq(a, b) SWEMU_FCMP(a, b, ==)
#define simd_vfcmple(a, b) SWEMU_FCMP(a, b, <=)
#define simd_vfcmplt(a, b) SWEMU_FCMP(a, b, <)
#define simd_vsmaxd(a, b) SWEMU_LANEWISE3(a, b, a, swemu_a_[swemu_i_] > swemu_b_[swemu_i_] ? swemu_a_[swemu_i_] : swemu_b_[swemu_i_])
#define simd_vsmind(a, b) SWEMU_LANEWISE3(a, b, a, swemu_a_[swemu_i_] < swemu_b_[swemu_i_] ? swemu_a_[swemu_i_] : swemu_b_[swemu_i_])
#define simd_vmaxd simd_vsmaxd
#define simd_vmind simd_vsmind

/* integer */
#define simd_vaddw(a, b)  ((a) + (b))
#define simd_vsubw(a, b)  ((a) - (b))
#define simd_vandw(a, b)  ((a) & (b))
#define simd_vbicw(a, b)  ((a) & ~(b))
#define simd_vbisw(a, b)  ((a) | (b))
#define simd_vornotw(a, b) ((a) | ~(b))
#define simd_vxorw(a, b)  ((a) ^ (b))
#define simd_veqvw(a, b)  (~((a) ^ (b)))
#define simd_vsllw(a, b)  ((a) << (b))
#define simd_vsraw(a, b)  ((a) >> (b))
#define simd_vsrlw(a, b)  SWEMU_LANEWISE1(a, (int)((unsigned)swemu_a_[swemu_i_] >> (b)))
#define simd_vaddl(a, b)  ((a) + (b))
#define simd_vsubl(a, b)  ((a) - (b))
#define simd_vcmpeqw(a, b) SWEMU_LANEWISE3(a, b, a, swemu_a_[swemu_i_] == swemu_b_[swemu_i_])
#define simd_vcmplew(a, b) SWEMU_LANEWISE3(a, b, a, swemu_a_[swemu_i_] <= swemu_b_[swemu_i_])
#define simd_vcmpltw(a, b) SWEMU_LANEWISE3(a, b, a, swemu_a_[swemu_i_] <  swemu_b_[swemu_i_])

/* lane extract / insert: simd_vextfN(v) returns lane N, simd_vinsfN(s, v)
 * returns v with lane N replaced by the scalar s */
#define simd_vextf0(a) ((a)[0])
#define simd_vextf1(a) ((a)[1])
#define simd_vextf2(a) ((a)[2])
#define simd_vextf3(a) ((a)[3])
#define simd_vextw0(a) ((a)[0])
#define simd_vextw1(a) ((a)[1])
#define simd_vextw2(a) ((a)[2])
#define simd_vextw3(a) ((a)[3])
#define simd_vextw4(a) ((a)[4])
#define simd_vextw5(a) ((a)[5])
#define simd_vextw6(a) ((a)[6])
#define simd_vextw7(a) ((a)[7])
#define SWEMU_VINS(s, v, n) ({ SWEMU_RVAL_T(v) swemu_v_ = (v); swemu_v_[n] = (s); swemu_v_; })
#define simd_vinsf0(s, v) SWEMU_VINS(s, v, 0)
#define simd_vinsf1(s, v) SWEMU_VINS(s, v, 1)
#define simd_vinsf2(s, v) SWEMU_VINS(s, v, 2)
#define simd_vinsf3(s, v) SWEMU_VINS(s, v, 3)
#define simd_vinsw0(s, v) SWEMU_VINS(s, v, 0)
#define simd_vinsw1(s, v) SWEMU_VINS(s, v, 1)
#define simd_vinsw2(s, v) SWEMU_VINS(s, v, 2)
#define simd_vinsw3(s, v) SWEMU_VINS(s, v, 3)
#define simd_vinsw4(s, v) SWEMU_VINS(s, v, 4)
#define simd_vinsw5(s, v) SWEMU_VINS(s, v, 5)
#define simd_vinsw6(s, v) SWEMU_VINS(s, v, 6)
#define simd_vinsw7(s, v) SWEMU_VINS(s, v, 7)
/* shuffle (sw5 simd.h): the low half of the result comes from vb, the high
 * half from va; lane i takes source lane (rc >> (i*w)) & (lanes-1), where
 * w = 2 bits for 4-lane and 4 bits for 8-lane vectors */
#define simd_vshff(va, vb, rc)                                                 \
    ({ SWEMU_RVAL_T(va) swemu_a_ = (va), swemu_b_ = (vb), swemu_r_;            \
       int swemu_n_ = SWEMU_LANES(swemu_a_), swemu_w_ = swemu_n_ == 4 ? 2 : 4; \
       for (int swemu_i_ = 0; swemu_i_ < swemu_n_; swemu_i_++) {               \
           int swemu_s_ = (int)(((unsigned long)(rc) >> (swemu_i_ * swemu_w_)) & (swemu_n_ - 1)); \
           swemu_r_[swemu_i_] = swemu_i_ < swemu_n_ / 2 ? swemu_b_[swemu_s_] : swemu_a_[swemu_s_]; \
       }                                                                       \
       swemu_r_; })

/* ---- printing (highest lane first, as the sw5 simd.h does) ---- */
#define SWEMU_FPRINT(fp, v, fmt)                                               \
    do { SWEMU_RVAL_T(v) swemu_p_ = (v);                                       \
         fprintf((fp), "[ ");                                                  \
         for (int swemu_i_ = SWEMU_LANES(swemu_p_) - 1; swemu_i_ >= 0; swemu_i_--) \
             fprintf((fp), fmt "%s", swemu_p_[swemu_i_], swemu_i_ ? ", " : ""); \
         fprintf((fp), " ]\n"); } while (0)
#define simd_fprint_doublev4(fp, v) SWEMU_FPRINT(fp, v, "%e")
#define simd_fprint_floatv4(fp, v)  SWEMU_FPRINT(fp, v, "%e")
#define simd_fprint_intv8(fp, v)    SWEMU_FPRINT(fp, v, "%d")
#define simd_fprint_uintv8(fp, v)   SWEMU_FPRINT(fp, v, "%u")
#define simd_fprint_int256(fp, v)   SWEMU_FPRINT(fp, v, "0x%lx")
#define simd_fprint_uint256(fp, v)  SWEMU_FPRINT(fp, v, "0x%lx")
#define simd_fprint_doublev8(fp, v) SWEMU_FPRINT(fp, v, "%e")
#define simd_fprint_floatv8(fp, v)  SWEMU_FPRINT(fp, v, "%e")
#define simd_fprint_intv16(fp, v)   SWEMU_FPRINT(fp, v, "%d")
#define simd_print_doublev4(v) simd_fprint_doublev4(stdout, v)
#define simd_print_floatv4(v)  simd_fprint_floatv4(stdout, v)
#define simd_print_intv8(v)    simd_fprint_intv8(stdout, v)
#define simd_print_uintv8(v)   simd_fprint_uintv8(stdout, v)
#define simd_print_int256(v)   simd_fprint_int256(stdout, v)
#define simd_print_uint256(v)  simd_fprint_uint256(stdout, v)
#define simd_print_doublev8(v) simd_fprint_doublev8(stdout, v)
#define simd_print_floatv8(v)  simd_fprint_floatv8(stdout, v)
#define simd_print_intv16(v)   simd_fprint_intv16(stdout, v)

/* ---- register communication (SW26010 CPEs only) ----
 * Row and column buses; each CPE has a bounded receive FIFO per bus
 * (SWEMU_RLC_DEPTH messages, default 4).  A put blocks while a target FIFO
 * is full; a get blocks until a message is there. */
#define simd_putr(x, y)                                                        \
    ({ SWEMU_RVAL_T(x) swemu_m_ = (x);                                         \
       swemu_rlc_put(0, &swemu_m_, (int)sizeof(swemu_m_), (int)(y)); })
#define simd_putc(x, y)                                                        \
    ({ SWEMU_RVAL_T(x) swemu_m_ = (x);                                         \
       swemu_rlc_put(1, &swemu_m_, (int)sizeof(swemu_m_), (int)(y)); })
#define simd_getr(x)                                                           \
    ({ SWEMU_RVAL_T(x) swemu_m_;                                               \
       swemu_rlc_get(0, &swemu_m_, (int)sizeof(swemu_m_)); swemu_m_; })
#define simd_getc(x)                                                           \
    ({ SWEMU_RVAL_T(x) swemu_m_;                                               \
       swemu_rlc_get(1, &swemu_m_, (int)sizeof(swemu_m_)); swemu_m_; })
/* load + broadcast to the other CPEs of the row / column (vldr, vldc,
 * ldder, lddec): the issuer gets the value too */
#define simd_loadr(x, y)  ({ simd_load(x, y);  simd_putr(x, 8); (x); })
#define simd_loadc(x, y)  ({ simd_load(x, y);  simd_putc(x, 8); (x); })
#define simd_loader(x, y) ({ simd_loade(x, y); simd_putr(x, 8); (x); })
#define simd_loadec(x, y) ({ simd_loade(x, y); simd_putc(x, 8); (x); })

#endif /* SWEMU_SIMD_H */
