/* Parallel loops over independent tasks for the nogil kernels, on a small
 * pool of POSIX threads that a kernel starts for one call (no OpenMP runtime
 * to vendor, and no spinning between loops: a waiting thread sleeps; only a
 * task waiting for another's flag, below, spins, then yields).
 *
 *   sf_pool *pool = sf_pool_start(threads);  // NULL: run everything inline
 *   sf_par_run(pool, ntasks, fn, ctx);        // fn(ctx, i) for each i, then return
 *   sf_pool_stop(pool);
 *
 * sf_par_run calls fn(ctx, i) once for every i in [0, ntasks): on the
 * caller's thread and on the helpers that wake in time, each claiming the
 * next task from a shared counter until none is left. Which thread runs a
 * task is not fixed, so a task must write only its own output and compute
 * it the same way whoever runs it: then results depend neither on the
 * thread count nor on the machine's load.
 *
 * Load: the caller never waits for a helper that has not joined a loop yet.
 * When the loop's tasks are all claimed the caller closes it, and a helper
 * that wakes later (its core busy with another process) finds it closed and
 * goes back to sleep; the caller waits only for helpers running a task. So a
 * busy core costs at most the task its helper holds, never a scheduler
 * time slice per loop (what made OpenBLAS's threads 3x slower there).
 *
 * Helpers start with every asynchronous signal blocked: a Ctrl-C goes to
 * the caller's thread, which polls for it between trials. If no helper can be started the
 * loops run inline. Without POSIX threads (Windows) everything runs inline. */
#ifndef STREAMFIT_PAR_H
#define STREAMFIT_PAR_H
#include <stddef.h>
#include <stdlib.h>

#include <time.h>

typedef void (*sf_task_fn)(void *ctx, int task);

static double sf_par_now(void)
{
    /* seconds on a monotonic clock (the policy's timings; tests' busy tasks) */
#if defined(CLOCK_MONOTONIC)
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
#else
    return (double) clock() / CLOCKS_PER_SEC;
#endif
}

/* What one call site's loops cost, inline and on the pool (seconds, running
 * averages). sf_par_run runs a loop the way whose average is lower and now
 * and then tries the other way (a probe): after SF_PAR_PROBE loops, then at
 * doubling intervals up to SF_PAR_PROBE_MAX while the probes keep losing,
 * back to SF_PAR_PROBE as soon as one beats the other way's average (one
 * sample against an average: a pool that now and then stalls for a time
 * slice is slightly favoured on a busy machine). So a pool whose helpers lose to a
 * busy machine (or to loops too short to share) stops being woken, and a
 * probe's cost -- a loop that waits for a helper preempted mid-task can
 * take a scheduler time slice -- is paid rarely. Zero-initialize. */
typedef struct {
    double inline_s, pool_s;
    long loops, next_probe, interval;
} sf_par_stat;
#define SF_PAR_PROBE 16
#define SF_PAR_PROBE_MAX 1024

static void sf_par_note(double *avg, double dt)
{
    *avg = *avg > 0 ? *avg + 0.25 * (dt - *avg) : dt;
}

/* The policy, apart from the clock (a test replays it on given times):
 * sf_par_choose says whether the next loop runs on the pool (and whether
 * that is a probe), sf_par_learn takes the time it took. */
static int sf_par_choose(sf_par_stat *st, int *probe)
{
    /* the first loop on the pool, the second inline; then the way whose
     * running average is lower, and the other one when a probe is due */
    *probe = 0;
    st->loops++;
    if (st->pool_s == 0 || st->inline_s == 0)
        return st->pool_s == 0;
    if (st->next_probe == 0) {
        st->interval = SF_PAR_PROBE;
        st->next_probe = st->loops + st->interval;
    }
    *probe = st->loops >= st->next_probe;
    return (st->pool_s <= st->inline_s) != *probe;
}

static void sf_par_learn(sf_par_stat *st, int use_pool, int probe, double dt)
{
    double *mine = use_pool ? &st->pool_s : &st->inline_s;
    double other = use_pool ? st->inline_s : st->pool_s;
    if (!probe) {
        sf_par_note(mine, dt);
        return;
    }
    if (dt < other) {
        /* the other way wins now: switch, and keep probing often */
        *mine = dt;
        st->interval = SF_PAR_PROBE;
    } else {
        sf_par_note(mine, dt);
        st->interval = st->interval < SF_PAR_PROBE_MAX / 2 ? 2 * st->interval
                                                            : SF_PAR_PROBE_MAX;
    }
    st->next_probe = st->loops + st->interval;
}

typedef struct {
    sf_task_fn fn;
    void *ctx;
    int ntasks;
    int next;       /* the next unclaimed task (atomic) */
} sf_par_loop;

static int sf_par_claim(sf_par_loop *lp)
{
    /* runs tasks until none is left; returns how many it ran */
    int i, ran = 0;
    while ((i = __atomic_fetch_add(&lp->next, 1, __ATOMIC_RELAXED)) < lp->ntasks) {
        lp->fn(lp->ctx, i);
        ran++;
    }
    return ran;
}

/* One-way flags between the tasks of a loop, for a task that needs another
 * task's first part done (the fused row update and product, _symm_par.pxd).
 * A waiter only ever waits for a task claimed before its own, which a
 * running thread holds and finishes without waiting itself, so the wait
 * ends. It spins ~2,000 pauses (such parts take microseconds), then yields
 * its core until the flag is set: a holder preempted on a busy machine costs
 * the waiter up to the holder's time slice, as a helper preempted mid-task
 * costs the caller at a loop's end. */
static inline void sf_flag_set(int *f)
{
    __atomic_store_n(f, 1, __ATOMIC_RELEASE);
}

#if defined(__x86_64__) || defined(__i386__)
#define SF_CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define SF_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define SF_CPU_RELAX() ((void) 0)
#endif

static void sf_flag_yield(void);

static inline void sf_flag_wait(const int *f)
{
    unsigned spins = 0;
    while (!__atomic_load_n(f, __ATOMIC_ACQUIRE)) {
        if (++spins < 2048)
            SF_CPU_RELAX();
        else
            sf_flag_yield();
    }
}

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#if defined(__linux__) && !defined(_GNU_SOURCE)
#include <sys/prctl.h>
#endif

static void sf_flag_yield(void) { sched_yield(); }

#define SF_POOL_MAX 64
#define SF_POOL_THREAD_NAME "streamfit-pool"

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    sf_par_loop *loop;      /* the open loop, NULL once closed */
    unsigned long gen;      /* loops opened so far */
    int inside;             /* helpers running the open (or closing) loop */
    long helper_tasks;      /* tasks the helpers ran (for the tests) */
    int stop;
    int helpers;
    pthread_t tid[SF_POOL_MAX];
} sf_pool;

static void *sf_pool_helper(void *arg)
{
    sf_pool *p = (sf_pool *) arg;
    unsigned long seen = 0;
    sf_par_loop *lp;
    int ran;
#if defined(__linux__) && !defined(_GNU_SOURCE)
    /* (no pthread_setname_np: the helper names itself, once it runs) */
    prctl(PR_SET_NAME, SF_POOL_THREAD_NAME, 0, 0, 0);
#endif
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->stop)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->stop)
            break;
        seen = p->gen;
        lp = p->loop;
        if (lp == NULL)
            continue;           /* woke after the loop closed */
        p->inside++;
        pthread_mutex_unlock(&p->mu);
        ran = sf_par_claim(lp);
        pthread_mutex_lock(&p->mu);
        p->helper_tasks += ran;
        if (--p->inside == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static sf_pool *sf_pool_start(int threads)
{
    sf_pool *p;
    sigset_t all, saved;
    int h;
    if (threads <= 1)
        return NULL;
    if (threads > SF_POOL_MAX + 1)
        threads = SF_POOL_MAX + 1;
    p = (sf_pool *) calloc(1, sizeof(sf_pool));
    if (p == NULL)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    /* the helpers inherit the mask: every asynchronous signal blocked, the
     * synchronous ones (a crash) left alone so that a fault in a helper is
     * still reported (faulthandler) rather than undefined */
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGABRT);
    sigdelset(&all, SIGTRAP);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    for (h = 0; h < threads - 1; h++) {
        if (pthread_create(&p->tid[p->helpers], NULL, sf_pool_helper, p) != 0)
            break;
#if defined(__linux__) && defined(_GNU_SOURCE)
        /* named, so that top -H, gdb and the tests can tell the pool's
         * helpers from the process's other threads (15 characters at most);
         * by the caller, so the name is there before the helper first runs */
        pthread_setname_np(p->tid[p->helpers], SF_POOL_THREAD_NAME);
#endif
        p->helpers++;
    }
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (p->helpers == 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->go);
        pthread_cond_destroy(&p->done);
        free(p);
        return NULL;
    }
    return p;
}

static long sf_pool_helper_tasks(sf_pool *p)
{
    /* tasks the helpers have run so far (0 without a pool) */
    long n;
    if (p == NULL)
        return 0;
    pthread_mutex_lock(&p->mu);
    n = p->helper_tasks;
    pthread_mutex_unlock(&p->mu);
    return n;
}

static void sf_pool_stop(sf_pool *p)
{
    int h;
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (h = 0; h < p->helpers; h++)
        pthread_join(p->tid[h], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p);
}

static void sf_par_pool_loop(sf_pool *p, sf_par_loop *lp)
{
    pthread_mutex_lock(&p->mu);
    p->loop = lp;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    sf_par_claim(lp);
    /* close the loop, then wait for the helpers inside it: the mutex orders
     * their writes before anything the caller does next */
    pthread_mutex_lock(&p->mu);
    p->loop = NULL;
    while (p->inside > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static void sf_par_run(sf_pool *p, sf_par_stat *st, int ntasks, sf_task_fn fn, void *ctx)
{
    sf_par_loop lp = {fn, ctx, ntasks, 0};
    int use_pool, probe;
    double t0;
    if (p == NULL || ntasks <= 1) {
        sf_par_claim(&lp);
        return;
    }
    use_pool = sf_par_choose(st, &probe);
    t0 = sf_par_now();
    if (use_pool)
        sf_par_pool_loop(p, &lp);
    else
        sf_par_claim(&lp);
    sf_par_learn(st, use_pool, probe, sf_par_now() - t0);
}
#else
static void sf_flag_yield(void) {}
typedef struct { int unused; } sf_pool;
static sf_pool *sf_pool_start(int threads) { (void) threads; return NULL; }
static void sf_pool_stop(sf_pool *p) { (void) p; }
static long sf_pool_helper_tasks(sf_pool *p) { (void) p; return 0; }
static void sf_par_run(sf_pool *p, sf_par_stat *st, int ntasks, sf_task_fn fn, void *ctx)
{
    sf_par_loop lp = {fn, ctx, ntasks, 0};
    (void) p;
    (void) st;
    sf_par_claim(&lp);
}
#endif
#endif
