/* Four threads each sleep a different simulated time, append their letter
 * under a mutex and exit; the main thread waits for each with
 * pthread_join (the kernel's exit futex, CLONE_CHILD_CLEARTID, which the
 * deterministic supervisor gives the wake of) and prints the letters. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char buf[16];
static int pos;

static void *worker(void *arg) {
    long id = (long)arg;
    struct timespec ts = {0, (4 - id) * 100000000L};
    nanosleep(&ts, 0);
    pthread_mutex_lock(&mu);
    buf[pos++] = 'a' + id;
    pthread_mutex_unlock(&mu);
    return 0;
}

int main(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], 0, worker, (void *)i);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], 0);
    printf("joined %s\n", buf);
    return 0;
}
