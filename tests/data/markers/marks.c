/* An application that marks its own timeline: every PERIOD_NS it writes
 * "rtscope-test-mark SEQ" to the kernel's trace_marker, and logs each write
 * as `SEQ BEFORE_NS AFTER_NS` (CLOCK_MONOTONIC around the write): the truth
 * tests/trace.rs judges rtscope's exported markers against.
 *
 * marks CPU PERIOD_NS SECONDS TRACE_MARKER LOG
 *
 * Pinned to CPU, at SCHED_OTHER, for at most SECONDS (or until SIGTERM, or
 * its parent's death). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig) { (void)sig; stop = 1; }

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: marks CPU PERIOD_NS SECONDS TRACE_MARKER LOG\n");
        return 2;
    }
    long long period = atoll(argv[2]), seconds = atoll(argv[3]);
    int fd = open(argv[4], O_WRONLY | O_CLOEXEC);
    FILE *log = fopen(argv[5], "w");
    if (fd < 0 || !log || period <= 0) {
        perror("marks: trace_marker or log");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGTERM, on_term);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(argv[1]), &set);
    if (sched_setaffinity(0, sizeof set, &set)) {
        perror("marks: affinity");
        return 1;
    }
    fprintf(log, "# seq before_ns after_ns\n");
    fflush(log);
    long long t = now(), until = t + seconds * 1000000000LL;
    char buf[64];
    for (long seq = 0; !stop && t < until; seq++) {
        t += period;
        struct timespec due = {.tv_sec = t / 1000000000LL, .tv_nsec = t % 1000000000LL};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL);
        int n = snprintf(buf, sizeof buf, "rtscope-test-mark %ld", seq);
        long long before = now();
        ssize_t w = write(fd, buf, n);
        long long after = now();
        if (w == n)
            fprintf(log, "%ld %lld %lld\n", seq, before, after);
    }
    fclose(log);
    return 0;
}
