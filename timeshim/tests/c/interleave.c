/* Four threads append their letter to one buffer under a mutex, with
 * different amounts of work between appends, sched_yield and short sleeps:
 * the order of the letters is decided by how the threads interleave. It
 * prints a hash of the whole order and its first 60 letters. Under
 * `--deterministic` the same seed gives the same order on every run
 * (timeshim/tests/deterministic.rs). Threads are waited for with a
 * condition variable (pthread_join is join.c's). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>

#define N 4
#define K 200

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char buf[N * K + 1];
static int pos, finished;
static volatile unsigned long spin;

static void *worker(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < K; i++) {
        for (int j = 0; j < (id + 1) * 500; j++)
            spin++;
        pthread_mutex_lock(&mu);
        buf[pos++] = 'a' + id;
        pthread_mutex_unlock(&mu);
        if (i % 7 == 0)
            sched_yield();
        if (i % 50 == 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, 0);
        }
    }
    pthread_mutex_lock(&mu);
    finished++;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    return 0;
}

int main(void) {
    pthread_t t[N];
    for (long i = 0; i < N; i++)
        pthread_create(&t[i], 0, worker, (void *)i);
    pthread_mutex_lock(&mu);
    while (finished < N)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    buf[pos] = 0;
    unsigned long h = 1469598103934665603UL;
    for (int i = 0; i < pos; i++) {
        h ^= (unsigned char)buf[i];
        h *= 1099511628211UL;
    }
    printf("%016lx %.60s\n", h, buf);
    return 0;
}
