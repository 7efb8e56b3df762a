/* Listens on a fixed TCP port of the loopback (argv[1]), and prints what it
 * sees: whether bind succeeded, the port getsockname shows, whether a second
 * bind of the port is refused, and a connection to the port from itself. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static int port_of(int fd, int peer) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int r = peer ? getpeername(fd, (struct sockaddr *)&a, &len)
                 : getsockname(fd, (struct sockaddr *)&a, &len);
    return r == 0 ? ntohs(a.sin_port) : -errno;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int port = atoi(argv[1]), one = 1;
    struct sockaddr_in a = loopback(port);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int r = bind(l, (struct sockaddr *)&a, sizeof a);
    printf("bind %s\n", r == 0 ? "ok" : strerror(errno));
    if (r != 0) return 1;
    listen(l, 8);
    printf("listening on %s\n", port_of(l, 0) == port ? "the port asked for" : "another port");
    int l2 = socket(AF_INET, SOCK_STREAM, 0);
    r = bind(l2, (struct sockaddr *)&a, sizeof a);
    printf("second bind %s\n", r == 0 ? "ok" : strerror(errno));
    int c = socket(AF_INET, SOCK_STREAM, 0);
    r = connect(c, (struct sockaddr *)&a, sizeof a);
    printf("connect %s\n", r == 0 ? "ok" : strerror(errno));
    int s = accept(l, NULL, NULL);
    printf("accepted %s\n", s >= 0 ? "yes" : strerror(errno));
    printf("peer is %s\n", port_of(c, 1) == port ? "the port asked for" : "another port");
    printf("accepted on %s\n", port_of(s, 0) == port ? "the port asked for" : "another port");
    write(c, "x", 1);
    char b = 0;
    ssize_t n = read(s, &b, 1);
    printf("read %zd %c\n", n, b);
    return 0;
}
