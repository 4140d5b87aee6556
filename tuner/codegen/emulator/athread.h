/*
 * athread.h - swemu replacement for the Sunway MPE (host) athread header.
 *
 * Compiled for a CPE (with -D__sw_slave__, as swgcc -mslave defines it) this
 * header just pulls in slave.h.  See README.md for the build commands.
 */
#ifndef SWEMU_ATHREAD_H
#define SWEMU_ATHREAD_H

#include "swemu_common.h"

#if defined(__sw_slave__) && !defined(SWEMU_FORCE_HOST)
#include "slave.h"
#else

#ifdef __cplusplus
extern "C" {
#endif

int athread_init(void);
int athread_halt(void);
int athread_join(void);
int __real_athread_spawn(void *fpc, void *arg);
/* SW26010-Pro all-shared mode (and the SW26010 chip with SWEMU_CGS > 1): every core group */
int athread_init_cgs(void);
int __real_athread_spawn_cgs(void *fpc, void *arg);
int athread_join_cgs(void);
void *malloc_cross(size_t size);
int athread_get_max_threads(void);
int athread_set_num_threads(int num);
int athread_get_num_threads(void);
int athread_get_id(int core);
/* used by the athread_spawn(_cgs) macros of the one-command build, see below */
int swemu_spawn_resolve(void *renamed, void *plain, const char *name, void *arg);
int swemu_spawn_cgs_resolve(void *renamed, void *plain, const char *name, void *arg);

#define SLAVE_FUN(x) slave_##x

/*
 * athread_spawn(f, arg) starts f(arg) on every CPE and returns at once.
 *
 * Two-stage build (hosts compiled with -D__sw_host__, slave objects renamed
 * so that every slave function f becomes slave_f, exactly what sw5cc -slave
 * does): the macro is the real one, __real_athread_spawn(slave_f, arg).
 *
 * One-command build (host.c and slave.c compiled together by one gcc call,
 * nothing renamed): slave_f is made a weak reference and, when it is not
 * defined, the plain slave function f is used instead.
 */
#if defined(__sw_host__) || defined(SWEMU_STRICT_SPAWN)
#define athread_spawn(y, z) __real_athread_spawn((void *)(slave_##y), (void *)(z))
#define athread_spawn_cgs(y, z) __real_athread_spawn_cgs((void *)(slave_##y), (void *)(z))
#else
#define SWEMU_PRAGMA_(x) _Pragma(#x)
#define SWEMU_SPAWN_(resolver, y, z)                                           \
    ({                                                                         \
        SWEMU_PRAGMA_(weak slave_##y)                                          \
        extern void y(void *) __attribute__((weak));                           \
        resolver((void *)(slave_##y), (void *)(y), #y, (void *)(z));           \
    })
#define athread_spawn(y, z) SWEMU_SPAWN_(swemu_spawn_resolve, y, z)
#define athread_spawn_cgs(y, z) SWEMU_SPAWN_(swemu_spawn_cgs_resolve, y, z)
#endif

/* SW26010-Pro all-shared mode: athread_spawn_cgs starts the kernel on the CPEs of every emulated core
 * group (SWEMU_CGS, default 1), athread_join_cgs waits for them all */
#define athread_halt_cgs()        athread_halt()
#define CRTS_init()               athread_init()
#define CRTS_athread_spawn        athread_spawn
#define CRTS_athread_join         athread_join
#define CRTS_athread_halt         athread_halt

/* MPE cycle counter (1.45 GHz SW26010, 2.1 GHz Pro MPE) */
#define athread_time_cycle()      swemu_mpe_cycles()
#define CRTS_time_cycle()         swemu_mpe_cycles()

#ifdef __cplusplus
}
#endif

#endif /* host */
#endif /* SWEMU_ATHREAD_H */
