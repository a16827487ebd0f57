/* The benchmark's subject: a tneat-style client on the NEAT API (libneat on taps).
 * neat_client HOST PORT N: opens N TCP flows; on each, writes 1 byte from on_writable,
 * shuts the sending side after on_all_written, and waits for the server's close
 * (on_close); exits 0 when every flow is closed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "neat.h"

static long flows, closed;

static neat_error_code on_error(struct neat_flow_operations *ops)
{
    fprintf(stderr, "neat_client: on_error %d\n", (int)ops->status);
    exit(1);
}

static neat_error_code on_readable(struct neat_flow_operations *ops)
{
    unsigned char buf[256];
    uint32_t n;
    neat_read(ops->ctx, ops->flow, buf, sizeof buf, &n, NULL, 0);
    return NEAT_OK;
}

static neat_error_code on_all_written(struct neat_flow_operations *ops)
{
    neat_shutdown(ops->ctx, ops->flow);
    ops->on_all_written = NULL;
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

static neat_error_code on_writable(struct neat_flow_operations *ops)
{
    if (neat_write(ops->ctx, ops->flow, (const unsigned char *)"x", 1, NULL, 0) != NEAT_OK)
        return on_error(ops);
    ops->on_writable = NULL;
    ops->on_all_written = on_all_written;
    ops->on_readable = on_readable;
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

static neat_error_code on_connected(struct neat_flow_operations *ops)
{
    ops->on_writable = on_writable;
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

static neat_error_code on_close(struct neat_flow_operations *ops)
{
    if (++closed == flows)
        neat_stop_event_loop(ops->ctx);
    return NEAT_OK;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: neat_client HOST PORT N\n");
        return 2;
    }
    flows = atol(argv[3]);
    struct neat_ctx *ctx = neat_init_ctx();
    neat_log_level(ctx, NEAT_LOG_ERROR);
    struct neat_flow_operations *ops = calloc(flows, sizeof *ops);
    for (long i = 0; i < flows; i++) {
        struct neat_flow *flow = neat_new_flow(ctx);
        if (neat_set_property(ctx, flow, "{\"transport\":{\"value\":\"TCP\",\"precedence\":2}}") != NEAT_OK)
            return 2;
        ops[i].on_connected = on_connected;
        ops[i].on_error = on_error;
        ops[i].on_close = on_close;
        neat_set_operations(ctx, flow, &ops[i]);
        if (neat_open(ctx, flow, argv[1], (uint16_t)atoi(argv[2]), NULL, 0) != NEAT_OK)
            return 2;
    }
    neat_start_event_loop(ctx, NEAT_RUN_DEFAULT);
    printf("neat_client: %ld flows closed\n", closed);
    neat_free_ctx(ctx);
    free(ops);
    return 0;
}
