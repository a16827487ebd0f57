/*
 * What an SCTP association attempt costs inside libusrsctp, two ways: a one-to-one
 * socket per attempt (what the usrsctp crate does: socket, bind, connect, abort on
 * close) and associations started on one shared one-to-many endpoint (connect only).
 * Nothing is sent anywhere: the output callback drops every packet.
 *
 *   cc -O2 -o /tmp/attempt_cost crates/usrsctp/c/attempt_cost.c -lusrsctp
 *   valgrind --tool=callgrind /tmp/attempt_cost socket 100   (then 300: the difference
 *   valgrind --tool=callgrind /tmp/attempt_cost shared 100    over 200 is per attempt)
 *
 * The shared mode also tries to abort its first association while the INIT is pending
 * (what a race does to a loser) and prints what usrsctp answers.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <usrsctp.h>

static int drop_packet(void *addr, void *buf, size_t len, uint8_t tos, uint8_t set_df)
{
    (void)addr; (void)buf; (void)len; (void)tos; (void)set_df;
    return 0;
}

static struct sockaddr_conn conn_addr(uintptr_t id, uint16_t port)
{
    struct sockaddr_conn s;
    memset(&s, 0, sizeof s);
    s.sconn_family = AF_CONN;
    s.sconn_port = htons(port);
    s.sconn_addr = (void *)id;
    return s;
}

/* Tries a user abort of the association to `remote` on the one-to-many socket `ep`. */
static void try_abort(struct socket *ep, struct sockaddr_conn *remote)
{
    struct sctp_paddrinfo pi;
    socklen_t len = sizeof pi;
    memset(&pi, 0, sizeof pi);
    memcpy(&pi.spinfo_address, remote, sizeof *remote);
    if (usrsctp_getsockopt(ep, IPPROTO_SCTP, SCTP_GET_PEER_ADDR_INFO, &pi, &len) < 0) {
        printf("abort: no association id: %s\n", strerror(errno));
        return;
    }
    struct sctp_sndinfo si;
    memset(&si, 0, sizeof si);
    si.snd_flags = SCTP_ABORT;
    si.snd_assoc_id = pi.spinfo_assoc_id;
    if (usrsctp_sendv(ep, "", 0, NULL, 0, &si, sizeof si, SCTP_SENDV_SNDINFO, 0) < 0)
        printf("abort of a pending association (id %u): %s\n", pi.spinfo_assoc_id, strerror(errno));
    else
        printf("abort of a pending association (id %u): done\n", pi.spinfo_assoc_id);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: attempt_cost socket|shared N\n");
        return 2;
    }
    int shared = strcmp(argv[1], "shared") == 0;
    int n = atoi(argv[2]);
    usrsctp_init(0, drop_packet, NULL);
    struct socket *ep = NULL;
    if (shared) {
        ep = usrsctp_socket(AF_CONN, SOCK_SEQPACKET, IPPROTO_SCTP, NULL, NULL, 0, NULL);
        struct sockaddr_conn any = conn_addr(0, 5000);
        if (ep == NULL || usrsctp_set_non_blocking(ep, 1) < 0 ||
            usrsctp_bind(ep, (struct sockaddr *)&any, sizeof any) < 0) {
            perror("shared endpoint");
            return 1;
        }
    }
    for (int i = 0; i < n; i++) {
        uintptr_t id = 0x1000 + (uintptr_t)i;
        struct sockaddr_conn remote = conn_addr(id, 9899);
        usrsctp_register_address((void *)id);
        if (shared) {
            if (usrsctp_connect(ep, (struct sockaddr *)&remote, sizeof remote) < 0 &&
                errno != EINPROGRESS) {
                perror("connect");
                return 1;
            }
            if (i == 0)
                try_abort(ep, &remote);
        } else {
            struct socket *s = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
            struct sockaddr_conn local = conn_addr(id, 0);
            struct linger abort_on_close = {1, 0};
            if (s == NULL || usrsctp_set_non_blocking(s, 1) < 0 ||
                usrsctp_bind(s, (struct sockaddr *)&local, sizeof local) < 0) {
                perror("socket");
                return 1;
            }
            if (usrsctp_connect(s, (struct sockaddr *)&remote, sizeof remote) < 0 &&
                errno != EINPROGRESS) {
                perror("connect");
                return 1;
            }
            usrsctp_setsockopt(s, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
            usrsctp_close(s);
        }
        usrsctp_deregister_address((void *)id);
    }
    printf("%s: %d attempts\n", shared ? "shared endpoint" : "socket per attempt", n);
    return 0;
}
