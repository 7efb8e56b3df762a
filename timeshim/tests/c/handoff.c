/* A wake-up that passes through no system call the supervisor sees: the
 * main thread, woken by a line on stdin (an untimed read, not supervised),
 * writes an eventfd on which a second thread waits in a timed epoll_wait
 * (held by the supervisor), then blocks on stdin again. Between the write
 * and the supervisor's handling of the ready descriptor, every thread is
 * asleep in the kernel: the probe must not call that quiescent.
 * Prints "held" once the waiter is about to wait, "woke <sim s>" when it is
 * released, and "end" when stdin closes. */
#include <pthread.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static int efd, ep;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *waiter(void *arg) {
    (void)arg;
    struct epoll_event ev;
    printf("held\n");
    fflush(stdout);
    int n = epoll_wait(ep, &ev, 1, 3600 * 1000);
    printf("woke %d %.6f\n", n, now());
    fflush(stdout);
    return NULL;
}

int main(void) {
    efd = eventfd(0, EFD_CLOEXEC);
    ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 1};
    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    char c;
    if (read(0, &c, 1) != 1) return 1;
    unsigned long long one = 1;
    if (write(efd, &one, 8) != 8) return 1;
    while (read(0, &c, 1) == 1) {
    }
    pthread_join(t, NULL);
    printf("end\n");
    return 0;
}
