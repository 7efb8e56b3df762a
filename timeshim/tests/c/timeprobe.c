/* timeprobe.c: a C program's clocks and timed waits on simulated time, for
 * timeshim/tests/seccomp.rs. Built static (cc -static -pthread): no vDSO
 * once the supervisor hides it, no dynamic symbols to interpose. Prints one
 * line per check; every duration is measured with the program's own clocks. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag = 0;

static void *signaller(void *arg) {
    (void)arg;
    struct timespec d = {2, 0};
    nanosleep(&d, NULL);
    pthread_mutex_lock(&mu);
    flag = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* Waits on the condition variable until `flag` or `secs` of realtime. */
static int timed_wait(int secs) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += secs;
    int r = 0;
    pthread_mutex_lock(&mu);
    while (!flag && r == 0)
        r = pthread_cond_timedwait(&cv, &mu, &until);
    pthread_mutex_unlock(&mu);
    return r;
}

int main(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    printf("start %ld %ld\n", (long)time(NULL), (long)tv.tv_sec);
    double t0 = mono();

    struct timespec hour = {3600, 0};
    nanosleep(&hour, NULL);
    printf("nanosleep %.6f\n", mono() - t0);

    double t = mono();
    struct timespec abs;
    clock_gettime(CLOCK_MONOTONIC, &abs);
    abs.tv_sec += 10;
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL);
    printf("clock_nanosleep %.6f\n", mono() - t);

    t = mono();
    usleep(250000);
    printf("usleep %.6f\n", mono() - t);

    t = mono();
    int r = timed_wait(5);
    printf("condwait %s %.6f\n", r == ETIMEDOUT ? "timedout" : "signalled", mono() - t);

    pthread_t th;
    pthread_create(&th, NULL, signaller, NULL);
    t = mono();
    r = timed_wait(30);
    printf("condwait %s %.6f\n", r == ETIMEDOUT ? "timedout" : "signalled", mono() - t);
    pthread_join(th, NULL);

    t = mono();
    poll(NULL, 0, 1500);
    printf("poll %.6f\n", mono() - t);

    int fds[2];
    if (pipe(fds) == 0) {
        t = mono();
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(fds[0], &rd);
        struct timeval to = {2, 500000};
        int n = select(fds[0] + 1, &rd, NULL, NULL, &to);
        printf("select %d %.6f\n", n, mono() - t);
        if (write(fds[1], "x", 1) == 1) {
            FD_ZERO(&rd);
            FD_SET(fds[0], &rd);
            struct timeval to2 = {60, 0};
            t = mono();
            n = select(fds[0] + 1, &rd, NULL, NULL, &to2);
            printf("select ready %d %d %.6f\n", n, FD_ISSET(fds[0], &rd) ? 1 : 0, mono() - t);
        }
    }
    printf("end %.6f\n", mono() - t0);
    return 0;
}
