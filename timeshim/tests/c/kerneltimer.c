/* Arms a timer the kernel runs on real time (a timerfd, or alarm(2) with
 * "alarm" as argument), waits for it and prints "fired". Without
 * --deterministic it works (on real time); under the mode it is refused. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void on_alarm(int sig) { (void)sig; }

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "alarm") == 0) {
        signal(SIGALRM, on_alarm);
        alarm(1);
        pause();
        printf("fired\n");
        return 0;
    }
    int fd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec its = {{0, 0}, {0, 10000000}};
    if (fd < 0 || timerfd_settime(fd, 0, &its, 0) != 0) {
        perror("timerfd");
        return 1;
    }
    uint64_t n;
    if (read(fd, &n, sizeof n) != sizeof n) {
        perror("read");
        return 1;
    }
    printf("fired\n");
    return 0;
}
