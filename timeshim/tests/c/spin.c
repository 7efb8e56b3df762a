/* spin.c: a thread that spins at one simulated instant until another
 * thread, asleep for 5 simulated seconds, sets a flag; for
 * timeshim/tests/deterministic.rs (the busy bound). Each turn of the loop
 * writes a byte to /dev/null: a system call, never quiet, nothing sent on a
 * socket. On a frozen clock the loop never ends unless the supervisor holds
 * it and lets the clock move. With an argument N, the other thread sleeps
 * 1 s N times instead, and the turns between its wake-ups are printed too:
 * a spinner released at every tick of a timer. Built static
 * (cc -static -pthread). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static atomic_int flag = 0;
static atomic_int ticks = 0;
static int n_ticks = 0;

static void *sleeper(void *arg) {
    (void)arg;
    if (n_ticks == 0) {
        struct timespec d = {5, 0};
        nanosleep(&d, NULL);
    } else {
        struct timespec d = {1, 0};
        for (int i = 0; i < n_ticks; i++) {
            nanosleep(&d, NULL);
            atomic_fetch_add(&ticks, 1);
        }
    }
    atomic_store(&flag, 1);
    return NULL;
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc > 1) n_ticks = atoi(argv[1]);
    long per_tick[64] = {0};
    int fd = open("/dev/null", O_WRONLY);
    double t0 = mono();
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    long turns = 0;
    while (!atomic_load(&flag)) {
        if (write(fd, "x", 1) != 1) return 1;
        turns++;
        int k = atomic_load(&ticks);
        if (k < 64) per_tick[k]++;
    }
    pthread_join(t, NULL);
    printf("spun %ld turns, done after %.3f s\n", turns, mono() - t0);
    if (n_ticks > 0) {
        printf("per tick:");
        for (int k = 0; k <= n_ticks && k < 64; k++) printf(" %ld", per_tick[k]);
        printf("\n");
    }
    return 0;
}
