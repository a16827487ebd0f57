/*
 * epoll_client HOST PORT FLOWS
 *
 * The C baseline of `taps-bench connect-cli`: the work of
 *   taps connect HOST PORT --flows FLOWS --send-bytes 1 \
 *        --props '{"transport":{"value":"TCP","precedence":2}}'
 * on one epoll loop, the way a plain C program does it: FLOWS non-blocking TCP sockets
 * (TCP_NODELAY, as taps sets by default) connect to HOST:PORT (an IPv4 or IPv6 literal)
 * at once; each connected flow writes 1 byte and shuts its sending side down, waits for
 * the server's close (end of stream) and closes. Prints one summary line, like taps
 * does with --flows > 1, and exits 1 if any flow failed (with the first error on
 * stderr), 2 on bad arguments. Gives up on flows still open after 10 s without events.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum state { CONNECTING, SHUT, DONE };

struct flow {
    int fd;
    enum state state;
};

static int failed;
static char first_error[256];

static void fail(struct flow *f, const char *what, int err) {
    if (failed++ == 0)
        snprintf(first_error, sizeof first_error, "%s: %s", what, strerror(err));
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    f->state = DONE;
}

/* Parses HOST and PORT into `addr`; returns its length, 0 if HOST is no literal. */
static socklen_t parse_addr(const char *host, int port, struct sockaddr_storage *addr) {
    struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;
    memset(addr, 0, sizeof *addr);
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((unsigned short)port);
        return sizeof *v4;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((unsigned short)port);
        return sizeof *v6;
    }
    return 0;
}

/* Opens flow `i` and starts its connect; registers it with the epoll instance. */
static void start(int ep, struct flow *f, unsigned i, const struct sockaddr_storage *addr,
                  socklen_t len) {
    int one = 1;
    f->state = CONNECTING;
    f->fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (f->fd < 0) {
        fail(f, "socket", errno);
        return;
    }
    setsockopt(f->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(f->fd, (const struct sockaddr *)addr, len) < 0 && errno != EINPROGRESS) {
        fail(f, "connect", errno);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.u32 = i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, f->fd, &ev) < 0)
        fail(f, "epoll_ctl", errno);
}

/* Moves flow `f` on after `events`; returns 1 when it is done (closed or failed). */
static int step(struct flow *f, unsigned events) {
    if (f->state == CONNECTING && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int err = 0;
        socklen_t l = sizeof err;
        if (getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
            err = errno;
        if (err) {
            fail(f, "connect", err);
            return 1;
        }
        if (write(f->fd, "Z", 1) != 1) {
            fail(f, "write", errno ? errno : EIO);
            return 1;
        }
        if (shutdown(f->fd, SHUT_WR) < 0) {
            fail(f, "shutdown", errno);
            return 1;
        }
        f->state = SHUT;
    }
    if (f->state == SHUT && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        char buf[512];
        for (;;) {
            ssize_t n = read(f->fd, buf, sizeof buf);
            if (n > 0)
                continue;
            if (n == 0) {
                close(f->fd);
                f->fd = -1;
                f->state = DONE;
                return 1;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR)
                continue;
            fail(f, "read", errno);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: epoll_client HOST PORT FLOWS\n");
        return 2;
    }
    int port = atoi(argv[2]);
    long flows = atol(argv[3]);
    struct sockaddr_storage addr;
    socklen_t len = parse_addr(argv[1], port, &addr);
    if (len == 0 || port <= 0 || port > 65535 || flows <= 0 || flows > 1000000) {
        fprintf(stderr, "epoll_client: bad HOST (a literal), PORT or FLOWS\n");
        return 2;
    }
    struct flow *fl = calloc((size_t)flows, sizeof *fl);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (!fl || ep < 0) {
        perror("epoll_client: setup");
        return 1;
    }
    long open = 0;
    for (long i = 0; i < flows; i++) {
        start(ep, &fl[i], (unsigned)i, &addr, len);
        open += fl[i].state != DONE;
    }
    struct epoll_event evs[256];
    while (open > 0) {
        int n = epoll_wait(ep, evs, 256, 10000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            for (long i = 0; i < flows; i++)
                if (fl[i].state != DONE)
                    fail(&fl[i], "no progress within 10 s", n < 0 ? errno : ETIMEDOUT);
            break;
        }
        for (int k = 0; k < n; k++)
            open -= step(&fl[evs[k].data.u32], evs[k].events);
    }
    printf("%ld flows: %ld connected, %d failed, %ld bytes sent\n", flows, flows - failed,
           failed, flows - failed);
    if (failed)
        fprintf(stderr, "epoll_client: %d of %ld flows failed; first: %s\n", failed, flows,
                first_error);
    close(ep);
    free(fl);
    return failed ? 1 : 0;
}
