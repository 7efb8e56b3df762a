/* randprobe.c: the randomness a static C program is given, for
 * timeshim/tests/seccomp.rs: the auxiliary vector's AT_RANDOM bytes and
 * getrandom(2). */
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/random.h>

int main(void) {
    const unsigned char *at = (const unsigned char *)getauxval(AT_RANDOM);
    printf("at_random");
    for (int i = 0; i < 16; i++)
        printf(" %02x", at[i]);
    printf("\n");
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        printf("getrandom error\n");
        return 1;
    }
    printf("getrandom");
    for (int i = 0; i < 16; i++)
        printf(" %02x", b[i]);
    printf("\n");
    return 0;
}
