/* A periodic real-time program written as programs are (no frame-pointer
 * flags): every PERIOD_NS it wakes (clock_nanosleep, absolute), and on
 * one period in ten calls slow_path(), which loops on clock_gettime() for
 * SLOW_NS, making that period late; otherwise fast_path(), FAST_NS of the
 * same loop. It waits for the file GO to exist before its first period,
 * runs PERIODS periods, and writes to LOG: the periods, those that took
 * the slow path, and those whose own response (from the programmed
 * release to the end of its work) was above DEADLINE_NS.
 *
 * usage: latecall CPU PRIO PERIOD_NS PERIODS SLOW_NS FAST_NS DEADLINE_NS GO LOG
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Each path loops on a counter of its own: two identical bodies would be
 * folded into one function by the compiler (-fipa-icf, on at -O2). */
static volatile unsigned long slow_loops, fast_loops;

__attribute__((noinline)) void slow_path(long long ns) {
    long long end = now_ns() + ns;
    while (now_ns() < end)
        slow_loops++;
}

__attribute__((noinline)) void fast_path(long long ns) {
    long long end = now_ns() + ns;
    while (now_ns() < end)
        fast_loops += 3;
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: latecall CPU PRIO PERIOD_NS PERIODS SLOW_NS FAST_NS DEADLINE_NS GO LOG\n");
        return 2;
    }
    int cpu = atoi(argv[1]), prio = atoi(argv[2]);
    long long period = atoll(argv[3]), periods = atoll(argv[4]);
    long long slow = atoll(argv[5]), fast = atoll(argv[6]), deadline = atoll(argv[7]);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        return 1;
    }
    struct sched_param sp = {.sched_priority = prio};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
        perror("sched_setscheduler");
        return 1;
    }
    struct timespec pause = {0, 10000000};
    while (access(argv[8], F_OK) != 0)
        nanosleep(&pause, NULL);
    long long next = now_ns() + period, slow_n = 0, late_n = 0;
    for (long long i = 0; i < periods; i++) {
        struct timespec at = {next / 1000000000LL, next % 1000000000LL};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
        if (i % 10 == 9) {
            slow_path(slow);
            slow_n++;
        } else {
            fast_path(fast);
        }
        late_n += now_ns() - next > deadline;
        next += period;
    }
    FILE *f = fopen(argv[9], "w");
    if (!f) {
        perror(argv[9]);
        return 1;
    }
    fprintf(f, "%lld %lld %lld\n", periods, slow_n, late_n);
    fclose(f);
    return 0;
}
