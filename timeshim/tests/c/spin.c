/* spin.c: a thread that spins at one simulated instant until another
 * thread, asleep for 5 simulated seconds, sets a flag; for
 * timeshim/tests/deterministic.rs (the busy bound). Each turn of the loop
 * writes a byte to /dev/null: a system call, never quiet, nothing sent on a
 * socket. On a frozen clock the loop never ends unless the supervisor holds
 * it and lets the clock move. Built static (cc -static -pthread). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static atomic_int flag = 0;

static void *sleeper(void *arg) {
    (void)arg;
    struct timespec d = {5, 0};
    nanosleep(&d, NULL);
    atomic_store(&flag, 1);
    return NULL;
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void) {
    int fd = open("/dev/null", O_WRONLY);
    double t0 = mono();
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    long turns = 0;
    while (!atomic_load(&flag)) {
        if (write(fd, "x", 1) != 1) return 1;
        turns++;
    }
    pthread_join(t, NULL);
    printf("spun %ld turns, done after %.3f s\n", turns, mono() - t0);
    return 0;
}
