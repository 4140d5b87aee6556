/*
 * athread_emu.c - swemu: run Sunway SW26010 / SW26010-Pro athread programs
 * on x86 (gcc, pthreads).  See README.md for what is emulated and how.
 *
 *  - one pthread per CPE (SWEMU_CPES, default 64, 8x8 mesh) in each of
 *    SWEMU_CGS core groups (default 1; 4 on an SW26010 chip, 6 on a Pro);
 *    a host thread spawns on its own CG (athread_init binds it), or on every
 *    CG at once (athread_spawn_cgs); each CG's CPEs, barriers, register buses
 *    and DMA counters are its own
 *  - LDM = the thread's TLS (__thread_local objects), its ldm_malloc arena
 *    and its stack; the __thread_local + ldm_malloc bytes are checked
 *    against SWEMU_LDM_BYTES
 *  - DMA / RMA = memcpy that completes at once; reply words are incremented
 *  - register communication = bounded FIFOs per CPE and bus
 *  - per-CPE counters and errors go to the JSON report named by SWEMU_REPORT
 *  - every emulator error is fatal: message on stderr, report written,
 *    process exits with SWEMU_ERROR_EXIT (86)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SWEMU_NO_RPCC 1
#include "slave.h"
#include "athread.h"

#define MAXCPE SWEMU_MAX_CPES
#define MAXCG SWEMU_MAX_CGS
#define MSG_MAX 64           /* bytes per register-communication message   */
#define RLC_MAXDEPTH 16
#define MAX_BLKS 512         /* live ldm_malloc blocks per CPE              */
#define MAX_REPLIES 256      /* dma.h reply slots per CPE                   */
#define MAX_BARS 512         /* distinct barrier groups per spawn           */
#define MAX_EVENTS 64
#define LDM_ALIGN 64

/* ------------------------------------------------------------------ */
/* state                                                              */
/* ------------------------------------------------------------------ */
typedef struct { unsigned char d[MSG_MAX]; } msg_t;
typedef struct { msg_t q[RLC_MAXDEPTH]; int head, count; } fifo_t;
typedef struct { char *p; size_t n; } blk_t;

typedef struct {
    int id, row, col;                 /* id, row, col within its core group */
    int cg;                           /* its core group (_CGN)             */
    int active;                       /* member of the current spawn       */
    pthread_t th;
    char *tls_lo, *tls_hi;            /* this thread's TLS block (LDM)     */
    char *stk_lo, *stk_hi;            /* this thread's stack (LDM)         */
    char *arena;                      /* ldm_malloc arena                  */
    size_t arena_cap;
    blk_t blk[MAX_BLKS];
    int nblk;
    size_t dyn_used, dyn_peak;
    unsigned long long get_reqs, get_bytes, get_lines;
    unsigned long long put_reqs, put_bytes, put_lines;
    unsigned long long rma_reqs, rma_bytes;
    unsigned long long rlc_put, rlc_get, syncs, unaligned;
    const char *volatile state;
    void *replies[MAX_REPLIES];
    int nreplies;
    fifo_t rq, cq;                    /* row / column receive FIFOs        */
    char *altstack;
} cpe_t;

typedef struct {
    char type[40];
    int cpe;
    int has_ldm;
    long long requested, stat, dyn, budget, count;
    char msg[512];
} event_t;

static struct {
    pthread_once_t once;
    int user_init, ncpe_max, nthreads, ncg, next_host_cg;
    size_t ldm_budget, static_ldm, stack_bytes, tls_memsz;
    double cpe_hz, mpe_hz, timeout_s;
    int rlc_depth, verbose, signals;
    const char *report_path;
    char target[32];
    pthread_mutex_t mu;
    pthread_cond_t done_cv;
    unsigned long long spawns, host_unaligned;
    double wall_ns;
    int exit_hooked;
} G = { .once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER,
        .done_cv = PTHREAD_COND_INITIALIZER };

typedef struct { uint64_t key; int total, arrived; unsigned gen; } bar_t;

/* one core group: its spawn, its barrier groups and its register buses */
typedef struct {
    int running, ndone;
    void (*fn)(void *);
    void *arg;
    pthread_barrier_t start_bar;
    double t_spawn;
    bar_t bars[MAX_BARS];
    int nbars;
    pthread_mutex_t rlc_mu[2][8];
    pthread_cond_t rlc_cv[2][8];
} cg_t;

static cg_t CG[MAXCG];
static cpe_t CPE_ALL[MAXCG][MAXCPE];
/* the CPEs of this thread's core group: a CPE's own, a host thread's bound CG
 * (athread_init); ids below are within the group */
static _Thread_local cpe_t *C = CPE_ALL[0];
static _Thread_local int HOST_CG = -1;   /* a host thread's CG, -1 before athread_init */

static event_t ERRS[MAX_EVENTS], WARNS[MAX_EVENTS];
static int NERR, NWARN;
static int FATAL_FLAG;

static pthread_mutex_t BMU = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t BCV = PTHREAD_COND_INITIALIZER;

/* CPE identity, visible to slave code through slave.h */
_Thread_local int _MYID = -1;
_Thread_local char _ROW = -1, _COL = -1, _PEN = -1, _CGN = 0;
static _Thread_local int SELF = -1;
static _Thread_local char TLS_ANCHOR;

/* __thread_local objects live in the TLS section "swemu_ldm" */
extern char __start_swemu_ldm[] __attribute__((weak));
extern char __stop_swemu_ldm[] __attribute__((weak));

static char REPORT_BUF[1 << 20];

static void ensure_init(void);
static void write_report(void);
static void fatal(int cpe, const char *type, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

/* ------------------------------------------------------------------ */
/* small helpers                                                      */
/* ------------------------------------------------------------------ */
static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 0);
    return end == s ? dflt : v;
}

static double env_double(const char *name, double dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    double v = strtod(s, &end);
    return end == s ? dflt : v;
}

static int popcount64(uint64_t x) { return __builtin_popcountll(x); }

static uint64_t lines128(uintptr_t a, size_t n)
{
    if (!n) return 0;
    return (uint64_t)(((a + n + 127) >> 7) - (a >> 7));
}

static void stderr_write(const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0) break;
        s += w;
        n -= (size_t)w;
    }
}

static void add_event(event_t *arr, int *n, int dedupe, int cpe, const char *type,
                      const char *msg)
{
    if (dedupe) {
        for (int i = 0; i < *n; i++)
            if (!strcmp(arr[i].type, type)) { arr[i].count++; return; }
    }
    if (*n >= MAX_EVENTS) return;
    event_t *e = &arr[(*n)++];
    memset(e, 0, sizeof(*e));
    snprintf(e->type, sizeof e->type, "%s", type);
    e->cpe = cpe;
    e->count = 1;
    snprintf(e->msg, sizeof e->msg, "%s", msg);
}

static void warn(int cpe, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* msg: the text of a printf-style call's format and arguments */
#define FORMAT_ARGS(msg, fmt)                                                  \
    char msg[512];                                                             \
    do {                                                                       \
        va_list ap_;                                                           \
        va_start(ap_, fmt);                                                    \
        vsnprintf(msg, sizeof msg, fmt, ap_);                                  \
        va_end(ap_);                                                           \
    } while (0)

static void warn(int cpe, const char *type, const char *fmt, ...)
{
    FORMAT_ARGS(msg, fmt);
    pthread_mutex_lock(&G.mu);
    int first = 1;
    for (int i = 0; i < NWARN; i++)
        if (!strcmp(WARNS[i].type, type)) first = 0;
    add_event(WARNS, &NWARN, 1, cpe, type, msg);
    pthread_mutex_unlock(&G.mu);
    if (first && G.verbose) {
        char line[700];
        snprintf(line, sizeof line, "swemu: warning: %s (CPE %d): %s\n", type, cpe, msg);
        stderr_write(line);
    }
}

static void flush_stdout_if_free(void)
{
    if (ftrylockfile(stdout) == 0) {
        fflush_unlocked(stdout);
        funlockfile(stdout);
    }
}

static void fatal_event(int cpe, const char *type, const char *msg, const event_t *ldm)
    __attribute__((noreturn));
static void fatal_event(int cpe, const char *type, const char *msg, const event_t *ldm)
{
    if (__atomic_exchange_n(&FATAL_FLAG, 1, __ATOMIC_SEQ_CST)) {
        /* another thread is already reporting an error: wait for its _exit */
        for (;;) pause();
    }
    if (NERR < MAX_EVENTS) {
        event_t *e = &ERRS[NERR];
        if (ldm) *e = *ldm; else memset(e, 0, sizeof(*e));
        snprintf(e->type, sizeof e->type, "%s", type);
        e->cpe = cpe;
        e->count = 1;
        snprintf(e->msg, sizeof e->msg, "%s", msg);
        NERR++;
    }
    char line[800];
    if (cpe >= 0)
        snprintf(line, sizeof line, "swemu: error: %s on CPE %d: %s\n", type, cpe, msg);
    else
        snprintf(line, sizeof line, "swemu: error: %s on the MPE (host): %s\n", type, msg);
    stderr_write(line);
    flush_stdout_if_free();
    write_report();
    _exit(SWEMU_ERROR_EXIT);
}

static void fatal(int cpe, const char *type, const char *fmt, ...)
{
    FORMAT_ARGS(msg, fmt);
    fatal_event(cpe, type, msg, NULL);
}

static int need_cpe(const char *api)
{
    int me = SELF;
    if (me < 0) fatal(-1, "not_on_cpe", "%s called on the MPE (host); it is a CPE-only call", api);
    return me;
}

/* ------------------------------------------------------------------ */
/* report                                                             */
/* ------------------------------------------------------------------ */
typedef struct { char *p; size_t n, cap; } sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->n >= b->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (w < 0) return;
    b->n += (size_t)w;
    if (b->n > b->cap) b->n = b->cap;
}

static void sb_str(sbuf *b, const char *s)
{
    sb_printf(b, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') sb_printf(b, "\\%c", ch);
        else if (ch < 0x20) sb_printf(b, "\\u%04x", ch);
        else sb_printf(b, "%c", ch);
    }
    sb_printf(b, "\"");
}

static void sb_events(sbuf *b, const event_t *ev, int n)
{
    sb_printf(b, "[");
    for (int i = 0; i < n; i++) {
        const event_t *e = &ev[i];
        sb_printf(b, "%s\n    {\"type\": ", i ? "," : "");
        sb_str(b, e->type);
        sb_printf(b, ", \"cpe\": %d, \"count\": %lld, \"message\": ", e->cpe, e->count);
        sb_str(b, e->msg);
        if (e->has_ldm)
            sb_printf(b, ", \"requested_bytes\": %lld, \"static_bytes\": %lld, "
                         "\"dynamic_bytes\": %lld, \"budget_bytes\": %lld",
                      e->requested, e->stat, e->dyn, e->budget);
        sb_printf(b, "}");
    }
    sb_printf(b, "%s]", n ? "\n  " : "");
}

#define CPE_FIELDS(X)                                                          \
    X(get_reqs) X(get_bytes) X(get_lines) X(put_reqs) X(put_bytes) X(put_lines) \
    X(rma_reqs) X(rma_bytes) X(rlc_put) X(rlc_get) X(syncs)

static void write_report(void)
{
    if (!G.report_path || !*G.report_path) return;
    sbuf b = { REPORT_BUF, 0, sizeof REPORT_BUF };
    int n = G.ncpe_max > 0 ? G.ncpe_max : 0;
    sb_printf(&b, "{\n  \"emulator\": \"swemu\",\n  \"version\": %d,\n", SWEMU_VERSION);
    sb_printf(&b, "  \"status\": \"%s\",\n  \"exit_code\": %d,\n", NERR ? "error" : "ok",
              NERR ? SWEMU_ERROR_EXIT : 0);
    sb_printf(&b, "  \"config\": {\"target\": ");
    sb_str(&b, G.target);
    sb_printf(&b, ", \"cpes\": %d, \"ldm_budget_bytes\": %zu, \"rlc_fifo_depth\": %d, "
                  "\"cpe_hz\": %.0f, \"mpe_hz\": %.0f",
              n, G.ldm_budget, G.rlc_depth, G.cpe_hz, G.mpe_hz);
    if (G.ncg > 1) sb_printf(&b, ", \"cgs\": %d", G.ncg);  /* a one-CG report reads as it always did */
    sb_printf(&b, "},\n");
    sb_printf(&b, "  \"ldm_static_bytes\": %zu,\n  \"spawns\": %llu,\n  \"kernel_wall_ns\": %.0f,\n",
              G.static_ldm, G.spawns, G.wall_ns);
    sb_printf(&b, "  \"cpes\": [");
    unsigned long long tot_get_reqs = 0, tot_get_bytes = 0, tot_get_lines = 0;
    unsigned long long tot_put_reqs = 0, tot_put_bytes = 0, tot_put_lines = 0;
    unsigned long long tot_rma_reqs = 0, tot_rma_bytes = 0, tot_rlc_put = 0, tot_rlc_get = 0;
    unsigned long long tot_syncs = 0, tot_unaligned = G.host_unaligned;
    size_t peak = 0;
    for (int k = 0; k < G.ncg * n; k++) {
        int i = k % n, g = k / n;
        cpe_t *c = &CPE_ALL[g][i];
        size_t lpeak = G.static_ldm + c->dyn_peak;
        sb_printf(&b, "%s\n    {\"id\": %d, \"row\": %d, \"col\": %d", k ? "," : "", i, i / 8, i % 8);
        if (G.ncg > 1) sb_printf(&b, ", \"cg\": %d", g);
#define X(f) sb_printf(&b, ", \"" #f "\": %llu", c->f);
        CPE_FIELDS(X)
#undef X
        sb_printf(&b, ", \"ldm_peak_bytes\": %zu, \"ldm_dynamic_peak_bytes\": %zu, "
                      "\"simd_unaligned\": %llu}",
                  lpeak, c->dyn_peak, c->unaligned);
        tot_get_reqs += c->get_reqs; tot_get_bytes += c->get_bytes; tot_get_lines += c->get_lines;
        tot_put_reqs += c->put_reqs; tot_put_bytes += c->put_bytes; tot_put_lines += c->put_lines;
        tot_rma_reqs += c->rma_reqs; tot_rma_bytes += c->rma_bytes;
        tot_rlc_put += c->rlc_put; tot_rlc_get += c->rlc_get; tot_syncs += c->syncs;
        tot_unaligned += c->unaligned;
        if (lpeak > peak) peak = lpeak;
    }
    sb_printf(&b, "\n  ],\n");
    if (G.ncg > 1) {  /* each core group's DMA and sync counts, summed over its CPEs */
        sb_printf(&b, "  \"core_groups\": [");
        for (int g = 0; g < G.ncg; g++) {
            unsigned long long sum[16] = {0};
            for (int i = 0; i < n; i++) {
                int f = 0;
#define X(fld) sum[f++] += CPE_ALL[g][i].fld;
                CPE_FIELDS(X)
#undef X
            }
            sb_printf(&b, "%s\n    {\"cg\": %d", g ? "," : "", g);
            int f = 0;
#define X(fld) sb_printf(&b, ", \"" #fld "\": %llu", sum[f++]);
            CPE_FIELDS(X)
#undef X
            sb_printf(&b, "}");
        }
        sb_printf(&b, "\n  ],\n");
    }
    sb_printf(&b, "  \"totals\": {\"get_reqs\": %llu, \"get_bytes\": %llu, \"get_lines\": %llu, "
                  "\"put_reqs\": %llu, \"put_bytes\": %llu, \"put_lines\": %llu, "
                  "\"rma_reqs\": %llu, \"rma_bytes\": %llu, \"rlc_put\": %llu, \"rlc_get\": %llu, "
                  "\"syncs\": %llu, \"ldm_peak_bytes\": %zu, \"simd_unaligned\": %llu},\n",
              tot_get_reqs, tot_get_bytes, tot_get_lines, tot_put_reqs, tot_put_bytes,
              tot_put_lines, tot_rma_reqs, tot_rma_bytes, tot_rlc_put, tot_rlc_get,
              tot_syncs, peak, tot_unaligned);
    sb_printf(&b, "  \"errors\": ");
    sb_events(&b, ERRS, NERR);
    sb_printf(&b, ",\n  \"warnings\": ");
    sb_events(&b, WARNS, NWARN);
    sb_printf(&b, "\n}\n");

    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", G.report_path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        stderr_write("swemu: cannot write the report file\n");
        return;
    }
    const char *p = b.p;
    size_t left = b.n;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w <= 0) break;
        p += w;
        left -= (size_t)w;
    }
    close(fd);
    if (rename(tmp, G.report_path) != 0) unlink(tmp);
}

/* ------------------------------------------------------------------ */
/* initialisation                                                     */
/* ------------------------------------------------------------------ */
struct tls_query { char *anchor; char *lo; size_t memsz; };

static int tls_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct tls_query *q = data;
    if (size < offsetof(struct dl_phdr_info, dlpi_tls_data) + sizeof(void *)) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_TLS || !info->dlpi_tls_data) continue;
        char *lo = info->dlpi_tls_data;
        size_t sz = info->dlpi_phdr[i].p_memsz;
        if (q->anchor >= lo && q->anchor < lo + sz) {
            q->lo = lo;
            q->memsz = sz;
            return 1;
        }
    }
    return 0;
}

static void my_tls_block(char **lo, size_t *memsz)
{
    struct tls_query q = { &TLS_ANCHOR, NULL, 0 };
    dl_iterate_phdr(tls_cb, &q);
    if (!q.lo) fatal(SELF, "internal", "cannot locate the thread-local storage block");
    *lo = q.lo;
    *memsz = q.memsz;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (__atomic_load_n(&FATAL_FLAG, __ATOMIC_SEQ_CST)) _exit(SWEMU_ERROR_EXIT);
    const char *name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS"
                     : sig == SIGFPE ? "SIGFPE" : sig == SIGILL ? "SIGILL" : "signal";
    char msg[200];
    snprintf(msg, sizeof msg, "%s (fault address %p) while running %s code", name,
             si ? si->si_addr : NULL, SELF >= 0 ? "CPE (slave)" : "MPE (host)");
    fatal_event(SELF, "crash", msg, NULL);
}

static int any_running(void)
{
    for (int g = 0; g < MAXCG; g++)
        if (CG[g].running) return 1;
    return 0;
}

static void at_exit(void)
{
    if (any_running()) warn(-1, "exit_without_join", "the program exited while CPE threads were still running");
    write_report();
    if (NERR) {
        flush_stdout_if_free();
        _exit(SWEMU_ERROR_EXIT);
    }
}

static void do_init(void)
{
    const char *t = getenv("SWEMU_TARGET");
    int pro = t && (strstr(t, "pro") || strstr(t, "Pro") || strstr(t, "PRO") || strstr(t, "26010p"));
    snprintf(G.target, sizeof G.target, "%s", pro ? "sw26010pro" : "sw26010");
    G.ncpe_max = (int)env_long("SWEMU_CPES", MAXCPE);
    if (G.ncpe_max < 1) G.ncpe_max = 1;
    if (G.ncpe_max > MAXCPE) G.ncpe_max = MAXCPE;
    G.nthreads = G.ncpe_max;
    G.ncg = (int)env_long("SWEMU_CGS", 1);
    if (G.ncg < 1) G.ncg = 1;
    if (G.ncg > MAXCG) G.ncg = MAXCG;
    long budget = env_long("SWEMU_LDM_BYTES", pro ? 262144 : 65536);
    G.ldm_budget = budget > 0 ? (size_t)budget : 65536;
    G.rlc_depth = (int)env_long("SWEMU_RLC_DEPTH", 4);
    if (G.rlc_depth < 1) G.rlc_depth = 1;
    if (G.rlc_depth > RLC_MAXDEPTH) G.rlc_depth = RLC_MAXDEPTH;
    G.cpe_hz = env_double("SWEMU_CPE_HZ", pro ? 2.25e9 : 1.45e9);
    G.mpe_hz = env_double("SWEMU_MPE_HZ", pro ? 2.1e9 : 1.45e9);
    G.timeout_s = env_double("SWEMU_TIMEOUT", 0.0);
    G.verbose = (int)env_long("SWEMU_VERBOSE", 0);
    G.signals = !env_long("SWEMU_NO_SIGNALS", 0);
    G.stack_bytes = (size_t)env_long("SWEMU_STACK_BYTES", 2L << 20);
    if (G.stack_bytes < (256u << 10)) G.stack_bytes = 256u << 10;
    G.report_path = getenv("SWEMU_REPORT");
    G.static_ldm = (__start_swemu_ldm && __stop_swemu_ldm)
                       ? (size_t)(__stop_swemu_ldm - __start_swemu_ldm) : 0;
    char *lo;
    my_tls_block(&lo, &G.tls_memsz);
    for (int g = 0; g < MAXCG; g++) {
        for (int i = 0; i < MAXCPE; i++) {
            cpe_t *c = &CPE_ALL[g][i];
            c->id = i;
            c->row = i / 8;
            c->col = i % 8;
            c->cg = g;
        }
        for (int d = 0; d < 2; d++)
            for (int i = 0; i < 8; i++) {
                pthread_mutex_init(&CG[g].rlc_mu[d][i], NULL);
                pthread_cond_init(&CG[g].rlc_cv[d][i], NULL);
            }
    }
    if (G.signals) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
        sigaction(SIGFPE, &sa, NULL);
        sigaction(SIGILL, &sa, NULL);
    }
    atexit(at_exit);
}

static void ensure_init(void) { pthread_once(&G.once, do_init); }

/* ------------------------------------------------------------------ */
/* host (MPE) API                                                     */
/* ------------------------------------------------------------------ */
/* The core group of this host thread: the k-th thread to call athread_init gets CG k mod SWEMU_CGS (a
 * host pthread per CG, each initialising before the next starts, as swDNN runs the SW26010's four CGs).
 * A thread that never called it spawns on CG 0. */
static int host_cg(void)
{
    return HOST_CG < 0 ? 0 : HOST_CG;
}

int athread_init(void)
{
    ensure_init();
    G.user_init = 1;
    if (HOST_CG < 0) {
        pthread_mutex_lock(&G.mu);
        HOST_CG = G.next_host_cg++ % G.ncg;
        pthread_mutex_unlock(&G.mu);
        C = CPE_ALL[HOST_CG];
    }
    return 0;
}

int athread_init_cgs(void) { return athread_init(); }

int swemu_cgs(void) { ensure_init(); return G.ncg; }

int athread_get_max_threads(void) { ensure_init(); return G.ncpe_max; }
int athread_get_num_threads(void) { ensure_init(); return G.nthreads; }

int athread_set_num_threads(int num)
{
    ensure_init();
    if (num < 1 || num > G.ncpe_max) return -EAGAIN;
    if (any_running()) return -EINVAL;
    G.nthreads = num;
    return 0;
}

int athread_get_id(int core)
{
    if (core == -1) return SELF;
    return core;
}

int athread_get_core(int id) { return athread_get_id(id); }

int swemu_self(void) { return SELF; }
int swemu_num_cpes(void) { ensure_init(); return G.nthreads; }

unsigned long swemu_cpe_cycles(void)
{
    ensure_init();
    return (unsigned long)(now_ns() * (G.cpe_hz / 1e9));
}

unsigned long swemu_cycles(void)
{
    return SELF >= 0 ? swemu_cpe_cycles() : swemu_mpe_cycles();
}

unsigned long swemu_mpe_cycles(void)
{
    ensure_init();
    return (unsigned long)(now_ns() * (G.mpe_hz / 1e9));
}

static void *cpe_main(void *p)
{
    cpe_t *c = p;
    cg_t *k = &CG[c->cg];
    C = CPE_ALL[c->cg];
    SELF = c->id;
    _MYID = c->id;
    _ROW = (char)c->row;
    _COL = (char)c->col;
    _PEN = (char)c->id;
    _CGN = (char)c->cg;
    size_t memsz;
    my_tls_block(&c->tls_lo, &memsz);
    c->tls_hi = c->tls_lo + memsz;
    pthread_attr_t at;
    if (pthread_getattr_np(pthread_self(), &at) == 0) {
        void *sa;
        size_t ss;
        pthread_attr_getstack(&at, &sa, &ss);
        c->stk_lo = sa;
        c->stk_hi = (char *)sa + ss;
        pthread_attr_destroy(&at);
    }
    if (c->altstack) {
        stack_t st;
        st.ss_sp = c->altstack;
        st.ss_size = 64 * 1024;
        st.ss_flags = 0;
        sigaltstack(&st, NULL);
    }
    c->state = "waiting for the other CPEs to start";
    pthread_barrier_wait(&k->start_bar);
    c->state = "running";
    k->fn(k->arg);
    c->state = "finished";
    pthread_mutex_lock(&G.mu);
    k->ndone++;
    pthread_cond_broadcast(&G.done_cv);
    pthread_mutex_unlock(&G.mu);
    return NULL;
}

/* start fpc(arg) on the CPEs of core group g */
static int spawn_cg(int g, void *fpc, void *arg, const char *api)
{
    ensure_init();
    cg_t *k = &CG[g];
    if (SELF >= 0) fatal(SELF, "spawn_on_cpe", "%s called on a CPE", api);
    if (!G.user_init)
        warn(-1, "spawn_without_init", "%s called before athread_init", api);
    if (k->running)
        fatal(-1, "spawn_while_running",
              "%s called while the previous spawn on core group %d has not been joined (athread_join missing)",
              api, g);
    if (!fpc) fatal(-1, "spawn_null", "%s: the slave function pointer is NULL", api);
    if (G.static_ldm > G.ldm_budget) {
        event_t e;
        memset(&e, 0, sizeof e);
        e.has_ldm = 1;
        e.requested = (long long)G.static_ldm;
        e.stat = (long long)G.static_ldm;
        e.dyn = 0;
        e.budget = (long long)G.ldm_budget;
        char msg[400];
        snprintf(msg, sizeof msg,
                 "__thread_local data needs %zu B but the LDM budget is %zu B "
                 "(SWEMU_LDM_BYTES); all %d CPEs are affected, the kernel was not started",
                 G.static_ldm, G.ldm_budget, G.nthreads);
        fatal_event(0, "ldm_overflow", msg, &e);
    }
    int n = G.nthreads;
    size_t arena_cap = G.ldm_budget + (size_t)LDM_ALIGN * MAX_BLKS;
    for (int i = 0; i < MAXCPE; i++) {
        cpe_t *c = &CPE_ALL[g][i];
        c->active = i < n;
        if (!c->active) continue;
        if (!c->arena || c->arena_cap != arena_cap) {
            free(c->arena);
            c->arena = malloc(arena_cap);
            if (!c->arena) fatal(-1, "out_of_memory", "cannot allocate the ldm_malloc arena");
            c->arena_cap = arena_cap;
        }
        if (!c->altstack && G.signals) c->altstack = malloc(64 * 1024);
        c->nblk = 0;
        c->dyn_used = 0;
        c->nreplies = 0;
        c->rq.count = c->rq.head = 0;
        c->cq.count = c->cq.head = 0;
        c->state = "created";
    }
    k->nbars = 0;
    pthread_barrier_init(&k->start_bar, NULL, (unsigned)n);
    k->fn = (void (*)(void *))fpc;
    k->arg = arg;
    k->ndone = 0;
    k->running = 1;
    k->t_spawn = now_ns();
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, G.stack_bytes + G.tls_memsz);
    for (int i = 0; i < n; i++) {
        int rc = pthread_create(&CPE_ALL[g][i].th, &at, cpe_main, &CPE_ALL[g][i]);
        if (rc) fatal(-1, "thread_create_failed", "pthread_create failed for CPE %d: %s", i, strerror(rc));
    }
    pthread_attr_destroy(&at);
    return 0;
}

int __real_athread_spawn(void *fpc, void *arg)
{
    ensure_init();
    __atomic_fetch_add(&G.spawns, 1, __ATOMIC_RELAXED);
    return spawn_cg(host_cg(), fpc, arg, "athread_spawn");
}

/* SW26010-Pro all-shared mode: fpc(arg) on the CPEs of every core group, each reading its _CGN */
int __real_athread_spawn_cgs(void *fpc, void *arg)
{
    ensure_init();
    __atomic_fetch_add(&G.spawns, 1, __ATOMIC_RELAXED);
    for (int g = 0; g < G.ncg; g++) spawn_cg(g, fpc, arg, "athread_spawn_cgs");
    return 0;
}

static void *resolve(void *renamed, void *plain, const char *name, const char *api)
{
    void *f = renamed ? renamed : plain;
    if (!f)
        fatal(-1, "spawn_not_found",
              "%s(%s): neither slave_%s nor %s is defined; is the slave file linked?", api, name, name, name);
    return f;
}

int swemu_spawn_resolve(void *renamed, void *plain, const char *name, void *arg)
{
    return __real_athread_spawn(resolve(renamed, plain, name, "athread_spawn"), arg);
}

int swemu_spawn_cgs_resolve(void *renamed, void *plain, const char *name, void *arg)
{
    return __real_athread_spawn_cgs(resolve(renamed, plain, name, "athread_spawn_cgs"), arg);
}

static void timeout_fatal(int g)
{
    char msg[512];
    size_t k = 0;
    int shown = 0;
    char where[24] = "";
    if (G.ncg > 1) snprintf(where, sizeof where, " of CG %d", g);
    k += (size_t)snprintf(msg + k, sizeof msg - k,
                          "the kernel did not finish within SWEMU_TIMEOUT=%.1f s; unfinished CPEs%s:",
                          G.timeout_s, where);
    for (int i = 0; i < G.nthreads && k < sizeof msg - 80; i++) {
        const char *s = CPE_ALL[g][i].state;
        if (s && !strcmp(s, "finished")) continue;
        if (shown++ < 8) k += (size_t)snprintf(msg + k, sizeof msg - k, " %d (%s);", i, s ? s : "?");
    }
    if (shown > 8 && k < sizeof msg - 40) snprintf(msg + k, sizeof msg - k, " ... %d in total", shown);
    fatal_event(-1, "timeout", msg, NULL);
}

/* wait for core group g's CPEs */
static int join_cg(int g)
{
    ensure_init();
    cg_t *k = &CG[g];
    if (!k->running) return -EINVAL;
    pthread_mutex_lock(&G.mu);
    if (G.timeout_s > 0) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        double s = (double)dl.tv_sec + dl.tv_nsec * 1e-9 + G.timeout_s;
        dl.tv_sec = (time_t)s;
        dl.tv_nsec = (long)((s - (double)dl.tv_sec) * 1e9);
        while (k->ndone < G.nthreads) {
            int rc = pthread_cond_timedwait(&G.done_cv, &G.mu, &dl);
            if (rc == ETIMEDOUT && k->ndone < G.nthreads) {
                pthread_mutex_unlock(&G.mu);
                timeout_fatal(g);
            }
        }
    } else {
        while (k->ndone < G.nthreads) pthread_cond_wait(&G.done_cv, &G.mu);
    }
    pthread_mutex_unlock(&G.mu);
    for (int i = 0; i < G.nthreads; i++) pthread_join(CPE_ALL[g][i].th, NULL);
    pthread_barrier_destroy(&k->start_bar);
    pthread_mutex_lock(&G.mu);
    k->running = 0;
    G.wall_ns += now_ns() - k->t_spawn;
    pthread_mutex_unlock(&G.mu);
    for (int i = 0; i < G.nthreads; i++) {
        const cpe_t *c = &CPE_ALL[g][i];
        if (c->rq.count || c->cq.count)
            warn(i, "rlc_unconsumed",
                 "register-communication messages left unread at the end of a kernel "
                 "(CPE %d: %d row, %d column)", i, c->rq.count, c->cq.count);
    }
    return 0;
}

int athread_join(void) { return join_cg(host_cg()); }

int athread_join_cgs(void)
{
    ensure_init();
    int rc = -EINVAL;
    for (int g = 0; g < G.ncg; g++)
        if (CG[g].running && join_cg(g) == 0) rc = 0;
    return rc;
}

int athread_halt(void)
{
    ensure_init();
    for (int g = 0; g < MAXCG; g++)
        if (CG[g].running) join_cg(g);
    write_report();
    if (G.verbose) {
        unsigned long long gr = 0, gb = 0, pr = 0, pb = 0;
        for (int g = 0; g < G.ncg; g++)
            for (int i = 0; i < G.ncpe_max; i++) {
                const cpe_t *c = &CPE_ALL[g][i];
                gr += c->get_reqs; gb += c->get_bytes;
                pr += c->put_reqs; pb += c->put_bytes;
            }
        fprintf(stderr, "swemu: %llu spawn(s), DMA get %llu req / %llu B, put %llu req / %llu B\n",
                G.spawns, gr, gb, pr, pb);
    }
    return 0;
}

/* memory every core group reaches (the SW26010-Pro cross segment; the all-share mode of SW26010):
 * one address space here, so ordinary aligned memory */
void *malloc_cross(size_t size)
{
    void *p = NULL;
    return posix_memalign(&p, 128, size ? size : 1) ? NULL : p;
}

/* ------------------------------------------------------------------ */
/* ------------------------------------------------------------------ */
/* LDM ranges and address translation                                 */
/* ------------------------------------------------------------------ */
static int in_range(const char *p, size_t n, const char *lo, const char *hi)
{
    return lo && p >= lo && p < hi && (size_t)(hi - p) >= n;
}

/* 1 = TLS (__thread_local), 2 = ldm_malloc arena, 3 = stack, 0 = not LDM */
static int ldm_region(const cpe_t *c, const void *ptr, size_t n)
{
    const char *p = ptr;
    if (n == 0) n = 1;
    if (in_range(p, n, c->tls_lo, c->tls_hi)) return 1;
    if (in_range(p, n, c->arena, c->arena + c->arena_cap)) return 2;
    if (in_range(p, n, c->stk_lo, c->stk_hi)) return 3;
    return 0;
}

/* the same LDM address in CPE `to` (NULL if p is not an LDM address of `from`) */
static char *xlate(const cpe_t *from, const void *ptr, const cpe_t *to)
{
    const char *p = ptr;
    if (from == to) return (char *)p;
    switch (ldm_region(from, p, 1)) {
    case 1: return to->tls_lo + (p - from->tls_lo);
    case 2: return to->arena + (p - from->arena);
    case 3: return to->stk_hi - (from->stk_hi - p);
    default: return NULL;
    }
}

static void rply_add(void *p, int size)
{
    if (!p) return;
    if (size == 4) __atomic_fetch_add((int *)p, 1, __ATOMIC_SEQ_CST);
    else __atomic_fetch_add((long *)p, 1, __ATOMIC_SEQ_CST);
}

static const char *region_name(int r)
{
    return r == 1 ? "__thread_local data" : r == 2 ? "ldm_malloc arena" : r == 3 ? "stack" : "?";
}

static void check_ldm(int me, const void *p, size_t n, const char *type, const char *api,
                      const char *what)
{
    if (!ldm_region(&C[me], p, n))
        fatal(me, type,
              "%s: %s %p (%zu B) is not in this CPE's LDM (__thread_local data, "
              "ldm_malloc block or stack)", api, what, p, n);
}

/* LDM side must be LDM, main-memory side must not be */
static void check_dma_sides(int me, const char *ldm, size_t foot, const char *mem, int is_get,
                            const char *api)
{
    const cpe_t *c = &C[me];
    const char *what = is_get ? "the destination" : "the source";
    if (!ldm_region(c, ldm, foot)) {
        int swapped = ldm_region(c, mem, 1) != 0;
        fatal(me, is_get ? "dma_dest_not_ldm" : "dma_src_not_ldm",
              "%s: %s %p (%zu B) is not in this CPE's LDM (__thread_local data, ldm_malloc "
              "block or stack)%s", api, what, (const void *)ldm, foot,
              swapped ? "; the main-memory argument is an LDM address: source and "
                        "destination look swapped" : "");
    }
    int r = ldm_region(c, mem, 1);
    if (r)
        fatal(me, "dma_mem_is_ldm",
              "%s: the main-memory address %p lies in this CPE's LDM (%s); "
              "are the source and destination arguments swapped?", api, (const void *)mem,
              region_name(r));
}

/* ------------------------------------------------------------------ */
/* CPE groups                                                         */
/* ------------------------------------------------------------------ */
static uint64_t active_mask(void)
{
    return G.nthreads >= 64 ? ~0ULL : ((1ULL << G.nthreads) - 1);
}

static uint64_t row_members(int row) { return (0xffULL << (8 * row)) & active_mask(); }

static uint64_t col_members(int col) { return (0x0101010101010101ULL << col) & active_mask(); }

static uint64_t rows_members(unsigned rows)
{
    uint64_t m = 0;
    for (int r = 0; r < 8; r++)
        if (rows & (1u << r)) m |= row_members(r);
    return m;
}

static uint64_t cols_members(unsigned cols)
{
    uint64_t m = 0;
    for (int c = 0; c < 8; c++)
        if (cols & (1u << c)) m |= col_members(c);
    return m;
}

static void barrier(int me, uint64_t members, const char *what)
{
    cg_t *k = &CG[C[me].cg];  /* a barrier group lies within one core group */
    pthread_mutex_lock(&BMU);
    bar_t *b = NULL;
    for (int i = 0; i < k->nbars; i++)
        if (k->bars[i].key == members) { b = &k->bars[i]; break; }
    if (!b) {
        if (k->nbars >= MAX_BARS) {
            pthread_mutex_unlock(&BMU);
            fatal(me, "internal", "too many distinct synchronisation groups");
        }
        b = &k->bars[k->nbars++];
        b->key = members;
        b->total = popcount64(members);
        b->arrived = 0;
        b->gen = 0;
    }
    unsigned g = b->gen;
    if (++b->arrived >= b->total) {
        b->arrived = 0;
        b->gen++;
        pthread_cond_broadcast(&BCV);
    } else {
        C[me].state = what;
        while (b->gen == g) pthread_cond_wait(&BCV, &BMU);
        C[me].state = "running";
    }
    pthread_mutex_unlock(&BMU);
}

int swemu_sync(int scp, int mask, const char *api)
{
    int me = need_cpe(api);
    cpe_t *c = &C[me];
    uint64_t m;
    switch (scp) {
    case ROW_SCOPE: m = cols_members((unsigned)mask & 0xff) & row_members(c->row); break;
    case COL_SCOPE: m = rows_members((unsigned)mask & 0xff) & col_members(c->col); break;
    case ARRAY_SCOPE:
        m = rows_members(((unsigned)mask >> 8) & 0xff) & cols_members((unsigned)mask & 0xff);
        break;
    case PP_SCOPE:
        if (mask < 0 || mask >= G.nthreads) fatal(me, "syn_not_member", "%s(PP_SCOPE): bad peer %d", api, mask);
        m = (1ULL << me) | (1ULL << mask);
        break;
    default:
        fatal(me, "syn_bad_scope", "%s: unknown scope %d", api, scp);
    }
    if (!(m & (1ULL << me)))
        fatal(me, "syn_not_member",
              "%s(scope %d, mask 0x%x): the synchronisation group does not contain this CPE%s",
              api, scp, (unsigned)mask,
              scp == ARRAY_SCOPE ? " (ARRAY_SCOPE mask: bits 8-15 select rows, bits 0-7 "
                                   "columns; 0xffff = all)" : "");
    c->syncs++;
    barrier(me, m, api);
    return 0;
}

int athread_syn(scope scp, int mask) { return swemu_sync((int)scp, mask, "athread_syn"); }

/* ------------------------------------------------------------------ */
/* DMA                                                                */
/* ------------------------------------------------------------------ */
/* main-memory side: len bytes in blocks of bsize separated by a gap of
 * stride bytes (bsize == 0: one contiguous block).  LDM side contiguous. */
typedef struct { long moff, loff, n; } mblk_t;

static int next_block(long len, long bsize, long stride, long k, mblk_t *b)
{
    if (bsize <= 0) {
        if (k > 0) return 0;
        b->moff = 0; b->loff = 0; b->n = len;
        return 1;
    }
    long loff = k * bsize;
    if (loff >= len) return 0;
    b->loff = loff;
    b->moff = k * (bsize + stride);
    b->n = len - loff < bsize ? len - loff : bsize;
    return 1;
}

/* the blocks of one transfer between main memory and an LDM buffer */
static void copy_blocks(int is_get, char *mem, char *ldm, long len, long bsize, long stride)
{
    mblk_t b;
    for (long k = 0; next_block(len, bsize, stride, k, &b); k++) {
        if (is_get) memcpy(ldm + b.loff, mem + b.moff, (size_t)b.n);
        else memcpy(mem + b.moff, ldm + b.loff, (size_t)b.n);
    }
}

static uint64_t count_lines(const char *mem, long len, long bsize, long stride)
{
    uint64_t lines = 0;
    mblk_t b;
    for (long k = 0; next_block(len, bsize, stride, k, &b); k++)
        lines += lines128((uintptr_t)(mem + b.moff), (size_t)b.n);
    return lines;
}

static void count_dma(cpe_t *c, int is_get, const char *mem, long len, long bsize, long stride)
{
    uint64_t lines = count_lines(mem, len, bsize, stride);
    if (is_get) { c->get_reqs++; c->get_bytes += (uint64_t)len; c->get_lines += lines; }
    else        { c->put_reqs++; c->put_bytes += (uint64_t)len; c->put_lines += lines; }
}

static char *target_addr(int me, const void *p, int t, const char *api, const char *what)
{
    char *q = xlate(&C[me], p, &C[t]);
    if (!q) fatal(me, "ldm_xlate", "%s: %s %p cannot be mapped to CPE %d's LDM", api, what, p, t);
    return q;
}

/* SW26010 athread_get / athread_put / dma() */
static int sw_dma(int is_get, int mode, char *mem, char *ldm, long len, long stride,
                  long bsize, unsigned mask, void *reply, const char *api)
{
    int me = need_cpe(api);
    cpe_t *c = &C[me];
    if (len < 0 || stride < 0 || bsize < 0)
        fatal(me, "dma_bad_args", "%s: negative len/stride/bsize (%ld, %ld, %ld)", api, len, stride, bsize);
    if (mode < PE_MODE || mode > RANK_MODE)
        fatal(me, "dma_mode_invalid", "%s: unknown DMA mode %d", api, mode);
    if (!is_get && (mode == BCAST_MODE || mode == BROW_MODE))
        fatal(me, "dma_mode_invalid", "%s: %s is a get-only mode", api,
              mode == BCAST_MODE ? "BCAST_MODE" : "BROW_MODE");
    if (mode == RANK_MODE && bsize <= 0)
        fatal(me, "dma_bad_args", "%s: RANK_MODE needs bsize > 0", api);
    if (reply && !ldm_region(c, reply, 4))
        fatal(me, "dma_reply_not_ldm", "%s: the reply word %p is not in this CPE's LDM", api, reply);
    if (!reply) warn(me, "dma_no_reply", "%s called with a NULL reply word", api);

    /* LDM footprint per CPE */
    long foot = len;
    if (mode == RANK_MODE) {
        long nb = (len + bsize - 1) / bsize;
        foot = 0;
        for (int j = 0; j < 8 && j < nb; j++) {
            long cnt = (nb - j + 7) / 8;
            long last = j + 8 * (cnt - 1);
            long lastn = len - last * bsize < bsize ? len - last * bsize : bsize;
            long f = (cnt - 1) * bsize + lastn;
            if (f > foot) foot = f;
        }
    }
    if (len > 0) check_dma_sides(me, ldm, (size_t)foot, mem, is_get, api);

    uint64_t targets = 1ULL << me;
    if (is_get) {
        if (mode == BCAST_MODE) {
            unsigned rows = mask & 0xff;
            if (!rows) {
                warn(me, "bcast_mask_zero", "%s(BCAST_MODE) with mask 0; treated as 0xff (all rows)", api);
                rows = 0xff;
            }
            targets = rows_members(rows);
        } else if (mode == ROW_MODE || mode == BROW_MODE || mode == RANK_MODE) {
            targets = row_members(c->row);
        }
    } else if (mode == RANK_MODE) {
        targets = row_members(c->row);
    }

    mblk_t b;
    if (mode == RANK_MODE) {
        /* row collective: block k (bsize bytes) <-> CPE (row, k % 8) at
         * LDM offset (k / 8) * bsize */
        for (long k = 0; next_block(len, bsize, stride, k, &b); k++) {
            int t = c->row * 8 + (int)(k % 8);
            if (!(targets & (1ULL << t))) {
                warn(me, "rank_mode_inactive_cpe", "%s(RANK_MODE): block for inactive CPE %d skipped", api, t);
                continue;
            }
            char *l = target_addr(me, ldm, t, api, "LDM address") + (k / 8) * bsize;
            if (is_get) memcpy(l, mem + b.moff, (size_t)b.n);
            else memcpy(mem + b.moff, l, (size_t)b.n);
        }
    } else if (is_get) {
        for (int t = 0; t < MAXCPE; t++)
            if (targets & (1ULL << t))
                copy_blocks(1, mem, target_addr(me, ldm, t, api, "destination"), len, bsize, stride);
    } else {
        copy_blocks(0, mem, ldm, len, bsize, stride);
    }
    count_dma(c, is_get, mem, len, bsize, stride);
    rply_add(reply, 4);
    return 0;
}

int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply, char mask,
                int stride, int bsize)
{
    return sw_dma(1, (int)mode, src, dest, len, stride, bsize, (unsigned char)mask, reply,
                  "athread_get");
}

int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply, int stride, int bsize)
{
    return sw_dma(0, (int)mode, dest, src, len, stride, bsize, 0, reply, "athread_put");
}

/* dma.h descriptor API */
int swemu_reply_index(void *reply)
{
    if (!reply) return 0;
    int me = need_cpe("dma_set_reply");
    cpe_t *c = &C[me];
    for (int i = 0; i < c->nreplies; i++)
        if (c->replies[i] == reply) return i + 1;
    if (c->nreplies >= MAX_REPLIES)
        fatal(me, "internal", "too many distinct dma_set_reply addresses");
    c->replies[c->nreplies++] = reply;
    return c->nreplies;
}

void *swemu_reply_ptr(int index)
{
    int me = need_cpe("dma");
    if (index <= 0 || index > C[me].nreplies) return NULL;
    return C[me].replies[index - 1];
}

int swemu_desc_dma(int op, int mode, long size, long bsize, long stride, int mask,
                   int reply_index, long mem, long ldm)
{
    void *reply = swemu_reply_ptr(reply_index);
    switch (op) {
    case DMA_GET: case DMA_GET_P:
        return sw_dma(1, mode, (char *)mem, (char *)ldm, size, stride, bsize,
                      (unsigned)mask, reply, "dma(DMA_GET)");
    case DMA_PUT: case DMA_PUT_P:
        return sw_dma(0, mode, (char *)mem, (char *)ldm, size, stride, bsize, 0, reply,
                      "dma(DMA_PUT)");
    case DMA_BARRIER:
        return 0;
    default:
        fatal(need_cpe("dma"), "dma_bad_args", "dma: unsupported op %d", op);
    }
}

/* SW26010-Pro athread_dma_* */
static uint64_t bc_members(const cpe_t *c, int bc)
{
    switch (bc) {
    case 1: return active_mask();
    case 2: return row_members(c->row);
    case 3: return col_members(c->col);
    default: return 1ULL << c->id;
    }
}

static void pro_dma_issue(int me, int op, char *mem, char *ldm, long len, long bsize, long stride,
                          void *rply, int rsize, int bc, const char *api)
{
    cpe_t *c = &C[me];
    if (len > 0) check_dma_sides(me, ldm, (size_t)len, mem, op, api);
    if (rply && !ldm_region(c, rply, (size_t)rsize))
        fatal(me, "dma_reply_not_ldm", "%s: the reply word %p is not in this CPE's LDM", api, rply);
    copy_blocks(op, mem, ldm, len, bsize, stride);
    count_dma(c, op, mem, len, bsize, stride);
    if (op && bc) {
        uint64_t targets = bc_members(c, bc);
        for (int t = 0; t < MAXCPE; t++) {
            if (!(targets & (1ULL << t)) || t == me) continue;
            if (len > 0) memcpy(target_addr(me, ldm, t, api, "destination"), ldm, (size_t)len);
        }
        if (rply)
            for (int t = 0; t < MAXCPE; t++)
                if (targets & (1ULL << t)) rply_add(target_addr(me, rply, t, api, "reply word"), rsize);
    } else {
        rply_add(rply, rsize);
    }
}

int swemu_pro_dma(int op, void *dst, void *src, long len, long bsize, long stride, void *rply,
                  int rsize, int bc, int coll, const char *api)
{
    int me = need_cpe(api);
    cpe_t *c = &C[me];
    if (len < 0 || bsize < 0 || stride < 0)
        fatal(me, "dma_bad_args", "%s: negative len/bsize/stride (%ld, %ld, %ld)", api, len, bsize, stride);
    char *mem = op ? src : dst, *ldm = op ? dst : src;
    if (!coll) {
        pro_dma_issue(me, op, mem, ldm, len, bsize, stride, rply, rsize, bc, api);
        return 0;
    }
    uint64_t members = bc_members(c, bc);
    int root = bc == 1 ? 0 : bc == 2 ? c->row * 8 : c->col;
    barrier(me, members, api);
    if (me == root) pro_dma_issue(me, op, mem, ldm, len, bsize, stride, NULL, 0, bc, api);
    barrier(me, members, api);
    return 0;
}

int swemu_wait_value(const volatile void *rply, int rsize, long value, const char *api)
{
    int me = SELF;
    if (me >= 0) C[me].state = api;
    for (;;) {
        long v = rsize == 4 ? (long)*(const volatile int *)rply : *(const volatile long *)rply;
        if (v >= value) break;
        sched_yield();
    }
    if (me >= 0) C[me].state = "running";
    return 0;
}

/* ------------------------------------------------------------------ */
/* RMA (SW26010-Pro)                                                  */
/* ------------------------------------------------------------------ */
static void rma_deliver(int me, uint64_t targets, const char *src, const void *dst, long len,
                        void *rrply, int rsize, const char *api)
{
    for (int t = 0; t < MAXCPE; t++) {
        if (!(targets & (1ULL << t))) continue;
        char *d = target_addr(me, dst, t, api, "remote address");
        if (len > 0 && d != src) memmove(d, src, (size_t)len);
    }
    if (rrply)
        for (int t = 0; t < MAXCPE; t++)
            if (targets & (1ULL << t)) rply_add(target_addr(me, rrply, t, api, "remote reply"), rsize);
}

int swemu_rma(int kind, void *laddr, void *lrply, int lsize, long len, int rtid, void *raddr,
              void *rrply, int rsize, unsigned mask, const char *api)
{
    int me = need_cpe(api);
    cpe_t *c = &C[me];
    if (len < 0) fatal(me, "rma_bad_args", "%s: negative length %ld", api, len);
    if ((len & 3) || ((uintptr_t)laddr & 3) || ((uintptr_t)raddr & 3))
        fatal(me, "rma_misaligned",
              "%s: RMA needs 4-byte aligned LDM addresses and a length multiple of 4 "
              "(local %p, remote %p, len %ld)", api, laddr, raddr, len);
    if (len > 0) {
        check_ldm(me, laddr, (size_t)len, "rma_addr_not_ldm", api, "the local address");
        check_ldm(me, raddr, (size_t)len, "rma_addr_not_ldm", api, "the remote address");
    }
    if (lrply) check_ldm(me, lrply, (size_t)lsize, "rma_addr_not_ldm", api, "the local reply word");
    if (rrply) check_ldm(me, rrply, (size_t)rsize, "rma_addr_not_ldm", api, "the remote reply word");

    uint64_t targets;
    switch (kind) {
    case SWEMU_RMA_PUT:
    case SWEMU_RMA_GET: {
        if (rtid < 0 || rtid >= G.nthreads || !C[rtid].active)
            fatal(me, "rma_bad_tid", "%s: remote CPE %d is not running", api, rtid);
        char *r = target_addr(me, raddr, rtid, api, "remote address");
        if (len > 0) {
            if (kind == SWEMU_RMA_PUT) memmove(r, laddr, (size_t)len);
            else memmove(laddr, r, (size_t)len);
        }
        if (rrply) rply_add(target_addr(me, rrply, rtid, api, "remote reply"), rsize);
        break;
    }
    case SWEMU_RMA_BCAST:     targets = active_mask(); goto bcast;
    case SWEMU_RMA_ROW_BCAST: targets = row_members(c->row); goto bcast;
    case SWEMU_RMA_COL_BCAST: targets = col_members(c->col); goto bcast;
    case SWEMU_RMA_ROW_MCAST: targets = rows_members(mask & 0xff) & ~(1ULL << me); goto bcast;
    case SWEMU_RMA_COL_MCAST: targets = cols_members(mask & 0xff) & ~(1ULL << me); goto bcast;
    bcast:
        rma_deliver(me, targets, laddr, raddr, len, rrply, rsize, api);
        break;
    case SWEMU_RMA_BCAST_COLL:
    case SWEMU_RMA_ROW_BCAST_COLL:
    case SWEMU_RMA_COL_BCAST_COLL: {
        uint64_t members = kind == SWEMU_RMA_BCAST_COLL ? active_mask()
                         : kind == SWEMU_RMA_ROW_BCAST_COLL ? row_members(c->row)
                                                            : col_members(c->col);
        int root = kind == SWEMU_RMA_BCAST_COLL ? (int)mask
                 : kind == SWEMU_RMA_ROW_BCAST_COLL ? c->row * 8 + (int)mask
                                                    : (int)mask * 8 + c->col;
        if (root < 0 || root >= MAXCPE || !(members & (1ULL << root)))
            fatal(me, "rma_bad_tid", "%s: root %u is not a running member of the group", api, mask);
        barrier(me, members, api);
        if (me == root) {
            rma_deliver(me, members, laddr, raddr, len, NULL, 0, api);
            c->rma_reqs++;
            c->rma_bytes += (uint64_t)len;
        }
        barrier(me, members, api);
        return 0;
    }
    default:
        fatal(me, "rma_bad_args", "%s: unknown RMA kind %d", api, kind);
    }
    rply_add(lrply, lsize);
    c->rma_reqs++;
    c->rma_bytes += (uint64_t)len;
    return 0;
}

/* ------------------------------------------------------------------ */
/* register communication (SW26010)                                   */
/* ------------------------------------------------------------------ */
void swemu_rlc_put(int dir, const void *v, int size, int dst)
{
    const char *api = dir ? "simd_putc" : "simd_putr";
    int me = need_cpe(api);
    cpe_t *c = &C[me];
    if (size <= 0 || size > MSG_MAX) fatal(me, "rlc_bad_size", "%s: %d-byte message", api, size);
    int bus = dir ? c->col : c->row;
    uint64_t bus_members = dir ? col_members(c->col) : row_members(c->row);
    uint64_t targets;
    if (dst & 8) {
        targets = bus_members & ~(1ULL << me);
    } else {
        int idx = dst & 7;
        int t = dir ? idx * 8 + c->col : c->row * 8 + idx;
        if (t == me || !(bus_members & (1ULL << t)))
            fatal(me, "rlc_invalid_target",
                  "%s(v, %d): target CPE %d is %s", api, dst, t,
                  t == me ? "the sender itself" : "not running");
        targets = 1ULL << t;
    }
    if (!targets) {
        warn(me, "rlc_no_receiver", "%s broadcast with no other CPE on the bus", api);
        return;
    }
    pthread_mutex_t *mu = &CG[c->cg].rlc_mu[dir][bus];
    pthread_cond_t *cv = &CG[c->cg].rlc_cv[dir][bus];
    pthread_mutex_lock(mu);
    c->state = dir ? "simd_putc (a receiver FIFO is full)" : "simd_putr (a receiver FIFO is full)";
    for (;;) {
        int full = 0;
        for (int t = 0; t < MAXCPE && !full; t++)
            if (targets & (1ULL << t)) {
                fifo_t *f = dir ? &C[t].cq : &C[t].rq;
                full = f->count >= G.rlc_depth;
            }
        if (!full) break;
        pthread_cond_wait(cv, mu);
    }
    for (int t = 0; t < MAXCPE; t++) {
        if (!(targets & (1ULL << t))) continue;
        fifo_t *f = dir ? &C[t].cq : &C[t].rq;
        msg_t *m = &f->q[(f->head + f->count) % RLC_MAXDEPTH];
        memset(m->d, 0, MSG_MAX);
        memcpy(m->d, v, (size_t)size);
        f->count++;
    }
    c->state = "running";
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
    c->rlc_put++;
}

void swemu_rlc_get(int dir, void *v, int size)
{
    const char *api = dir ? "simd_getc" : "simd_getr";
    int me = need_cpe(api);
    cpe_t *c = &C[me];
    if (size <= 0 || size > MSG_MAX) fatal(me, "rlc_bad_size", "%s: %d-byte message", api, size);
    int bus = dir ? c->col : c->row;
    fifo_t *f = dir ? &c->cq : &c->rq;
    pthread_mutex_t *mu = &CG[c->cg].rlc_mu[dir][bus];
    pthread_cond_t *cv = &CG[c->cg].rlc_cv[dir][bus];
    pthread_mutex_lock(mu);
    c->state = dir ? "simd_getc (waiting for data)" : "simd_getr (waiting for data)";
    while (f->count == 0) pthread_cond_wait(cv, mu);
    memcpy(v, f->q[f->head].d, (size_t)size);
    f->head = (f->head + 1) % RLC_MAXDEPTH;
    f->count--;
    c->state = "running";
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
    c->rlc_get++;
}

void swemu_simd_unaligned(const void *p, int need)
{
    int me = SELF;
    if (me >= 0) C[me].unaligned++;
    else __atomic_fetch_add(&G.host_unaligned, 1, __ATOMIC_RELAXED);
    warn(me, "simd_unaligned", "vector load/store at %p is not %d-byte aligned "
         "(an alignment trap on the real CPE)", p, need);
}

/* ------------------------------------------------------------------ */
/* LDM heap                                                           */
/* ------------------------------------------------------------------ */
static void ldm_overflow(int me, size_t req)
{
    cpe_t *c = &C[me];
    event_t e;
    memset(&e, 0, sizeof e);
    e.has_ldm = 1;
    e.requested = (long long)req;
    e.stat = (long long)G.static_ldm;
    e.dyn = (long long)c->dyn_used;
    e.budget = (long long)G.ldm_budget;
    char msg[400];
    snprintf(msg, sizeof msg,
             "ldm_malloc(%zu) exceeds the LDM budget: %zu B __thread_local + %zu B already "
             "allocated + %zu B requested > %zu B (SWEMU_LDM_BYTES)",
             req, G.static_ldm, c->dyn_used, req, G.ldm_budget);
    fatal_event(me, "ldm_overflow", msg, &e);
}

void *ldm_malloc(size_t size)
{
    int me = need_cpe("ldm_malloc");
    cpe_t *c = &C[me];
    if (G.static_ldm + c->dyn_used + size > G.ldm_budget || size > G.ldm_budget) ldm_overflow(me, size);
    if (c->nblk >= MAX_BLKS) fatal(me, "internal", "more than %d live ldm_malloc blocks", MAX_BLKS);
    /* first fit, blocks kept sorted by address, LDM_ALIGN-byte aligned */
    uintptr_t lo = ((uintptr_t)c->arena + LDM_ALIGN - 1) & ~(uintptr_t)(LDM_ALIGN - 1);
    uintptr_t end = (uintptr_t)c->arena + c->arena_cap;
    int pos = 0;
    for (; pos < c->nblk; pos++) {
        uintptr_t bp = (uintptr_t)c->blk[pos].p;
        if (lo + size <= bp) break;
        lo = (bp + c->blk[pos].n + LDM_ALIGN - 1) & ~(uintptr_t)(LDM_ALIGN - 1);
    }
    if (lo + size > end) ldm_overflow(me, size);
    memmove(&c->blk[pos + 1], &c->blk[pos], (size_t)(c->nblk - pos) * sizeof(blk_t));
    c->blk[pos].p = (char *)lo;
    c->blk[pos].n = size;
    c->nblk++;
    c->dyn_used += size;
    if (c->dyn_used > c->dyn_peak) c->dyn_peak = c->dyn_used;
    return (void *)lo;
}

void ldm_free(void *addr, size_t size)
{
    int me = need_cpe("ldm_free");
    cpe_t *c = &C[me];
    for (int i = 0; i < c->nblk; i++) {
        if (c->blk[i].p != addr) continue;
        if (c->blk[i].n != size)
            warn(me, "ldm_free_size_mismatch", "ldm_free(%p, %zu) but the block has %zu B",
                 addr, size, c->blk[i].n);
        c->dyn_used -= c->blk[i].n;
        memmove(&c->blk[i], &c->blk[i + 1], (size_t)(c->nblk - i - 1) * sizeof(blk_t));
        c->nblk--;
        return;
    }
    warn(me, "ldm_free_invalid", "ldm_free(%p, %zu): not a live ldm_malloc block", addr, size);
}

unsigned int get_allocatable_size(void)
{
    ensure_init();
    size_t used = G.static_ldm + (SELF >= 0 ? C[SELF].dyn_used : 0);
    return used >= G.ldm_budget ? 0u : (unsigned int)(G.ldm_budget - used);
}
