/* A SCHED_FIFO disturber as a real program is built: plain `gcc -O2 -g`,
 * no frame-pointer flags (the distribution's default), its burst a function
 * of its own that loops on the C library's clock_gettime() (the vDSO).
 * tests/trace_unwind.rs runs it beside `rtscope wakeup --trace --stacks
 * --sample-hz` and judges the stacks against its log.
 *
 * burst CPU PRIORITY PERIOD_NS BURST_NS SECONDS LOG
 *
 * Pinned to CPU at SCHED_FIFO PRIORITY, it spins BURST_NS every PERIOD_NS
 * for at most SECONDS (or until SIGTERM, or its parent's death), and logs
 * each burst as `disturb --log` does: start and end (CLOCK_MONOTONIC ns),
 * its thread, its CPU time in the burst, and the instant its sleep was due
 * to end. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig) { (void)sig; stop = 1; }

static long long ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The function the stacks must name: it calls the C library's
 * clock_gettime() until `end`, so that nearly every sample of it lands in
 * the vDSO or the C library, below it. */
__attribute__((noinline, noclone)) long long rtscope_test_burst(long long end) {
    struct timespec t;
    long long now, reads = 0;
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
        now = t.tv_sec * 1000000000LL + t.tv_nsec;
        reads++;
    } while (now < end);
    return reads;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: burst CPU PRIORITY PERIOD_NS BURST_NS SECONDS LOG\n");
        return 2;
    }
    int cpu = atoi(argv[1]);
    struct sched_param sp = {.sched_priority = atoi(argv[2])};
    long long period = atoll(argv[3]), burst = atoll(argv[4]), seconds = atoll(argv[5]);
    FILE *log = fopen(argv[6], "w");
    if (!log || period <= burst || burst <= 0) {
        fprintf(stderr, "burst: bad arguments or log\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGTERM, on_term);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) || sched_setscheduler(0, SCHED_FIFO, &sp)) {
        perror("burst: affinity or SCHED_FIFO");
        return 1;
    }
    fprintf(log, "# start_ns end_ns tid cpu_ns due_ns\n");
    fflush(log);
    long long t = ns(CLOCK_MONOTONIC), until = t + seconds * 1000000000LL, total = 0;
    pid_t tid = gettid();
    while (!stop && t < until) {
        t += period;
        struct timespec due = {.tv_sec = t / 1000000000LL, .tv_nsec = t % 1000000000LL};
        if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL))
            continue;
        long long c0 = ns(CLOCK_THREAD_CPUTIME_ID), start = ns(CLOCK_MONOTONIC);
        total += rtscope_test_burst(start + burst);
        long long end = ns(CLOCK_MONOTONIC), c1 = ns(CLOCK_THREAD_CPUTIME_ID);
        fprintf(log, "%lld %lld %d %lld %lld\n", start, end, (int)tid, c1 - c0, t);
        fflush(log);
    }
    fclose(log);
    return total > 0 ? 0 : 1;
}
