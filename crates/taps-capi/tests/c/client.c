/* Test client on the NEAT API: client MODE HOST PORT [PROPERTIES-JSON] [N]
 * echo:    writes N messages "message i", expects each back, closes; exit 0.
 * feed:    writes N bytes in 4 KiB writes from on_writable, closes after on_all_written.
 * daytime: prints what it reads until the server closes (on_close); exit 0.
 * flows:   opens N flows, writes 1 byte on each, closes each after on_all_written, exits
 *          when every flow is closed (tneat's 256-flow run).
 * leave:   as flows, but stops the loop once every flow has written its byte and leaves
 *          the closing to neat_free_ctx; then prints "freed" and sleeps 60 s (the flows'
 *          ends must reach the server while this process lives).
 * runonce: echo, driving the loop itself with NEAT_RUN_ONCE and poll() on the backend fd.
 * big:     writes N bytes in one neat_write, closes after on_all_written.
 * hold:    prints "connected", then waits; when the peer goes (on_close or on_error)
 *          prints "peer gone" and exits 0.
 * primary: sets the primary path to HOST, to 127.0.0.2 and to a name, printing each
 *          return code, then whether the statistics list the paths; closes.
 * other:   (a multihomed flow) sets the primary path to ::1, the peer's second address,
 *          retrying while the path is unconfirmed (up to 5 s), prints the return code and
 *          how many paths the statistics list; closes.
 * Any other on_error exits 1. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "neat.h"

static const char *mode, *host;
static long n_arg = 1;
static long sent_msgs, echoed_msgs, open_flows, closed_flows, written_flows;
static unsigned long long fed;
static unsigned char chunk[4096];
static char expect[64];
static int done;

static neat_error_code on_error(struct neat_flow_operations *ops)
{
    if (!strcmp(mode, "hold")) {
        printf("peer gone: on_error %d\n", (int)ops->status);
        fflush(stdout);
        exit(0);
    }
    fprintf(stderr, "client: on_error %d\n", (int)ops->status);
    exit(1);
}

static neat_error_code on_writable(struct neat_flow_operations *ops);

static neat_error_code on_readable(struct neat_flow_operations *ops)
{
    unsigned char buf[65536];
    uint32_t n = 0;
    neat_error_code rc = neat_read(ops->ctx, ops->flow, buf, sizeof buf - 1, &n, NULL, 0);
    if (rc == NEAT_ERROR_WOULD_BLOCK)
        return NEAT_OK;
    if (rc != NEAT_OK)
        return on_error(ops);
    if (n == 0) {
        /* NEAT's end of stream on SCTP; never on other stacks. */
        if (ops->transport_protocol != NEAT_STACK_SCTP) {
            fprintf(stderr, "client: 0-byte read on stack %d\n", ops->transport_protocol);
            exit(3);
        }
        neat_close(ops->ctx, ops->flow);
        return NEAT_OK;
    }
    buf[n] = 0;
    if (!strcmp(mode, "daytime")) {
        printf("%s", buf);
        return NEAT_OK;
    }
    if (strcmp((char *)buf, expect)) {
        fprintf(stderr, "client: got '%s', want '%s'\n", buf, expect);
        exit(5);
    }
    echoed_msgs++;
    if (echoed_msgs == n_arg) {
        printf("echo ok: %ld messages\n", echoed_msgs);
        neat_close(ops->ctx, ops->flow);
        neat_close(ops->ctx, ops->flow); /* twice is harmless */
        return NEAT_OK;
    }
    ops->on_readable = NULL;
    ops->on_writable = on_writable;
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

static neat_error_code on_all_written(struct neat_flow_operations *ops)
{
    if (!strcmp(mode, "feed") && fed < (unsigned long long)n_arg)
        return NEAT_OK;
    if (!strcmp(mode, "leave")) {
        if (++written_flows == open_flows)
            neat_stop_event_loop(ops->ctx);
        return NEAT_OK;
    }
    neat_close(ops->ctx, ops->flow);
    return NEAT_OK;
}

static neat_error_code on_writable(struct neat_flow_operations *ops)
{
    if (!strcmp(mode, "feed")) {
        while (fed < (unsigned long long)n_arg) {
            uint32_t len = sizeof chunk;
            if (fed + len > (unsigned long long)n_arg)
                len = (uint32_t)(n_arg - fed);
            if (neat_write(ops->ctx, ops->flow, chunk, len, NULL, 0) != NEAT_OK)
                return on_error(ops);
            fed += len;
            if (fed % (64 * 1024) == 0)
                return NEAT_OK; /* come back next iteration (level-triggered) */
        }
        ops->on_writable = NULL;
        ops->on_all_written = on_all_written;
        neat_set_operations(ops->ctx, ops->flow, ops);
        return NEAT_OK;
    }
    if (!strcmp(mode, "big")) {
        unsigned char *data = malloc(n_arg);
        for (long i = 0; i < n_arg; i++)
            data[i] = (unsigned char)(i * 31 + (i >> 11));
        neat_error_code rc = neat_write(ops->ctx, ops->flow, data, (uint32_t)n_arg, NULL, 0);
        free(data);
        if (rc != NEAT_OK) {
            fprintf(stderr, "client: neat_write of %ld bytes: %d\n", n_arg, (int)rc);
            exit(1);
        }
        ops->on_writable = NULL;
        ops->on_all_written = on_all_written;
        neat_set_operations(ops->ctx, ops->flow, ops);
        return NEAT_OK;
    }
    if (!strcmp(mode, "flows") || !strcmp(mode, "leave")) {
        if (neat_write(ops->ctx, ops->flow, chunk, 1, NULL, 0) != NEAT_OK)
            return on_error(ops);
        ops->on_writable = NULL;
        ops->on_all_written = on_all_written;
        neat_set_operations(ops->ctx, ops->flow, ops);
        return NEAT_OK;
    }
    snprintf(expect, sizeof expect, "message %ld", sent_msgs++);
    neat_write(ops->ctx, ops->flow, (unsigned char *)expect, strlen(expect), NULL, 0);
    ops->on_writable = NULL;
    ops->on_readable = on_readable;
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

static void primary_checks(struct neat_flow_operations *ops)
{
    printf("own %d\n", (int)neat_set_primary_dest(ops->ctx, ops->flow, host));
    printf("foreign %d\n", (int)neat_set_primary_dest(ops->ctx, ops->flow, "127.0.0.2"));
    printf("name %d\n", (int)neat_set_primary_dest(ops->ctx, ops->flow, "localhost"));
    char *stats = NULL;
    if (neat_get_stats(ops->ctx, &stats) == NEAT_OK && stats) {
        printf("paths %s\n", strstr(stats, "\"paths\"") ? "listed" : "absent");
        printf("primary %s\n", strstr(stats, "\"primary\": true") ? "marked" : "unmarked");
        free(stats);
    }
    fflush(stdout);
    neat_close(ops->ctx, ops->flow);
}

static void other_path_checks(struct neat_flow_operations *ops)
{
    neat_error_code rc = NEAT_ERROR_UNABLE;
    for (int i = 0; i < 250 && rc != NEAT_OK; i++) {
        rc = neat_set_primary_dest(ops->ctx, ops->flow, "::1");
        if (rc != NEAT_OK)
            poll(NULL, 0, 20);
    }
    printf("other %d\n", (int)rc);
    char *stats = NULL;
    int paths = 0, counted = 0;
    if (neat_get_stats(ops->ctx, &stats) == NEAT_OK && stats) {
        for (const char *p = stats; (p = strstr(p, "\"primary\":")) != NULL; p++)
            paths++;
        /* Paths whose bytes sent are counted (a number, not null). */
        for (const char *p = stats; (p = strstr(p, "\"bytes_sent\": ")) != NULL; p++)
            counted += p[14] >= '0' && p[14] <= '9';
        printf("v6 primary %s\n", strstr(stats, "[::1]") ? "listed" : "absent");
        free(stats);
    }
    printf("paths %d\n", paths);
    printf("counted %d\n", counted);
    fflush(stdout);
    neat_close(ops->ctx, ops->flow);
}

static neat_error_code on_connected(struct neat_flow_operations *ops)
{
    if (ops->transport_protocol == 0) {
        fprintf(stderr, "client: no transport_protocol in on_connected\n");
        exit(6);
    }
    if (!strcmp(mode, "primary")) {
        primary_checks(ops);
        return NEAT_OK;
    }
    if (!strcmp(mode, "other")) {
        other_path_checks(ops);
        return NEAT_OK;
    }
    if (!strcmp(mode, "hold")) {
        printf("connected\n");
        fflush(stdout);
        ops->on_readable = on_readable;
    } else if (!strcmp(mode, "daytime"))
        ops->on_readable = on_readable;
    else
        ops->on_writable = on_writable;
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

static neat_error_code on_close(struct neat_flow_operations *ops)
{
    (void)ops;
    closed_flows++;
    if (!strcmp(mode, "daytime"))
        printf("flow closed OK!\n");
    if (!strcmp(mode, "hold")) {
        printf("peer gone: on_close\n");
        fflush(stdout);
    }
    if (closed_flows == open_flows) {
        done = 1;
        neat_stop_event_loop(ops->ctx);
    }
    return NEAT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: client MODE HOST PORT [PROPERTIES] [N]\n");
        return 2;
    }
    mode = argv[1];
    host = argv[2];
    if (argc > 5)
        n_arg = atol(argv[5]);
    memset(chunk, 'x', sizeof chunk);
    struct neat_ctx *ctx = neat_init_ctx();
    neat_log_level(ctx, NEAT_LOG_WARNING);
    long flows = !strcmp(mode, "flows") || !strcmp(mode, "leave") ? n_arg : 1;
    struct neat_flow_operations *ops = calloc(flows, sizeof *ops);
    for (long i = 0; i < flows; i++) {
        struct neat_flow *flow = neat_new_flow(ctx);
        if (argc > 4 && strlen(argv[4]) && neat_set_property(ctx, flow, argv[4]) != NEAT_OK)
            return 2;
        ops[i].on_connected = on_connected;
        ops[i].on_error = on_error;
        ops[i].on_close = on_close;
        neat_set_operations(ctx, flow, &ops[i]);
        if (neat_open(ctx, flow, argv[2], (uint16_t)atoi(argv[3]), NULL, 0) != NEAT_OK)
            return 2;
        open_flows++;
    }
    if (!strcmp(mode, "runonce")) {
        mode = "echo";
        int iterations = 0;
        while (!done) {
            struct pollfd p = { .fd = neat_get_backend_fd(ctx), .events = POLLIN };
            poll(&p, 1, neat_get_backend_timeout(ctx));
            neat_start_event_loop(ctx, NEAT_RUN_ONCE);
            iterations++;
        }
        printf("run once: %d iterations\n", iterations);
    } else {
        neat_start_event_loop(ctx, NEAT_RUN_DEFAULT);
    }
    if (!strcmp(mode, "flows"))
        printf("flows ok: %ld closed\n", closed_flows);
    neat_free_ctx(ctx);
    if (!strcmp(mode, "leave")) {
        printf("freed\n");
        fflush(stdout);
        sleep(60);
    }
    free(ops);
    return 0;
}
