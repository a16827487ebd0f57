/* The benchmark's baseline: a plain epoll client doing what neat_client does.
 * epoll_client HOST-IPV4 PORT N: connects N TCP sockets (non-blocking), writes 1 byte
 * on each once it is connected, shuts the sending side, waits for the server's close
 * (read returns 0), closes; exits 0 when every flow is done. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: epoll_client HOST-IPV4 PORT N\n");
        return 2;
    }
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
    if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1)
        return 2;
    int n = atoi(argv[3]);
    int ep = epoll_create1(0);
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (fd < 0 || (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS)) {
            perror("connect");
            return 1;
        }
        struct epoll_event ev = { .events = EPOLLOUT, .data.fd = fd };
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    int done = 0;
    struct epoll_event evs[64];
    while (done < n) {
        int k = epoll_wait(ep, evs, 64, -1);
        for (int i = 0; i < k; i++) {
            int fd = evs[i].data.fd;
            if (evs[i].events & EPOLLOUT) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err || send(fd, "x", 1, MSG_NOSIGNAL) != 1) {
                    fprintf(stderr, "epoll_client: connect/send failed: %s\n", strerror(err ? err : errno));
                    return 1;
                }
                shutdown(fd, SHUT_WR);
                struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
            } else {
                char buf[256];
                ssize_t r = read(fd, buf, sizeof buf);
                if (r > 0 || (r < 0 && errno == EAGAIN))
                    continue;
                close(fd);
                done++;
            }
        }
    }
    printf("epoll_client: %d flows done\n", done);
    return 0;
}
