/* Test server on the NEAT API: server MODE PORT [PROPERTIES-JSON] [PEM]
 * MODE echo: writes back what it reads; discard: counts bytes, prints the total at
 * on_close; daytime: writes a line, then closes first. Runs until killed.
 * On SCTP the peer's end of stream is a 0-byte read (printed, then the flow closes);
 * on any other stack a 0-byte read is an error (exit 3).
 * PEM: certificate and key in one file (neat_secure_identity, NEAT_CERT_KEY_PEM), for
 * properties asking for security. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "neat.h"

static const char *mode;
static unsigned long long discarded;

struct conn {
    unsigned char buf[65536];
    uint32_t len;
    unsigned long long total;
};

static neat_error_code on_error(struct neat_flow_operations *ops)
{
    fprintf(stderr, "server: on_error %d\n", (int)ops->status);
    exit(2);
}

static neat_error_code on_writable(struct neat_flow_operations *ops);

static neat_error_code on_readable(struct neat_flow_operations *ops)
{
    struct conn *c = ops->userData;
    uint32_t n = 0;
    neat_error_code rc = neat_read(ops->ctx, ops->flow, c->buf, sizeof c->buf, &n, NULL, 0);
    if (rc == NEAT_ERROR_WOULD_BLOCK)
        return NEAT_OK;
    if (rc != NEAT_OK) {
        fprintf(stderr, "server: read error %d\n", (int)rc);
        return rc;
    }
    if (n == 0) {
        /* NEAT's end of stream on SCTP (msbench closes on it); never on TCP. */
        if (ops->transport_protocol != NEAT_STACK_SCTP) {
            fprintf(stderr, "server: 0-byte read on stack %d\n", ops->transport_protocol);
            exit(3);
        }
        printf("0-byte read at the end\n");
        fflush(stdout);
        neat_close(ops->ctx, ops->flow);
        return NEAT_OK;
    }
    c->total += n;
    if (!strcmp(mode, "echo")) {
        c->len = n;
        ops->on_readable = NULL; /* one message at a time */
        ops->on_writable = on_writable;
        neat_set_operations(ops->ctx, ops->flow, ops);
    }
    return NEAT_OK;
}

static neat_error_code on_writable(struct neat_flow_operations *ops)
{
    struct conn *c = ops->userData;
    neat_write(ops->ctx, ops->flow, c->buf, c->len, NULL, 0);
    ops->on_writable = NULL;
    ops->on_readable = on_readable;
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

static neat_error_code on_daytime_written(struct neat_flow_operations *ops)
{
    neat_close(ops->ctx, ops->flow);
    return NEAT_OK;
}

static neat_error_code on_close(struct neat_flow_operations *ops)
{
    struct conn *c = ops->userData;
    if (c) {
        if (!strcmp(mode, "discard")) {
            discarded += c->total;
            printf("discarded %llu\n", c->total);
        } else {
            printf("closed after %llu bytes\n", c->total);
        }
        fflush(stdout);
        free(c);
        ops->userData = NULL;
    }
    return NEAT_OK;
}

static neat_error_code on_connected(struct neat_flow_operations *ops)
{
    if (ops->userData != NULL) {
        fprintf(stderr, "server: accepted flow should inherit NULL userData\n");
        exit(4);
    }
    ops->userData = calloc(1, sizeof(struct conn));
    if (!strcmp(mode, "daytime")) {
        time_t now = time(NULL);
        char line[64];
        int len = snprintf(line, sizeof line, "%.24s\r\n", ctime(&now));
        neat_write(ops->ctx, ops->flow, (unsigned char *)line, len, NULL, 0);
        ops->on_all_written = on_daytime_written;
    } else {
        ops->on_readable = on_readable;
    }
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: server echo|discard|daytime PORT [PROPERTIES]\n");
        return 1;
    }
    mode = argv[1];
    struct neat_ctx *ctx = neat_init_ctx();
    struct neat_flow *flow = neat_new_flow(ctx);
    struct neat_flow_operations ops;
    memset(&ops, 0, sizeof ops);
    neat_log_level(ctx, NEAT_LOG_WARNING);
    if (argc > 3 && neat_set_property(ctx, flow, argv[3]) != NEAT_OK)
        return 1;
    if (argc > 4 && neat_secure_identity(ctx, flow, argv[4], NEAT_CERT_KEY_PEM) != NEAT_OK)
        return 1;
    ops.on_connected = on_connected;
    ops.on_error = on_error;
    ops.on_close = on_close;
    neat_set_operations(ctx, flow, &ops);
    if (neat_accept(ctx, flow, (uint16_t)atoi(argv[2]), NULL, 0) != NEAT_OK)
        return 1;
    printf("listening\n");
    fflush(stdout);
    neat_start_event_loop(ctx, NEAT_RUN_DEFAULT);
    neat_free_ctx(ctx);
    return 0;
}
