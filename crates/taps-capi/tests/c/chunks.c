/* Test client on the NEAT API: chunks HOST PORT PROPERTIES-JSON N
 * Writes N chunks of 1000 bytes, one per on_writable, each with a STREAM_ID option,
 * through one global operations struct handed to neat_set_operations (as NEAT's
 * client_data does). After the last chunk it sets on_all_written, which closes the
 * flow; on_close stops the loop; main frees the context and calls exit() at once.
 * Everything written must reach the server even though the process ends right after
 * the close (the stack may live in this process: SCTP over UDP). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "neat.h"

#define CHUNK 1000

static struct neat_flow_operations ops; /* one global struct, re-handed each time */
static struct neat_ctx *ctx;
static struct neat_flow *flow;
static long chunks_left;

static neat_error_code on_error(struct neat_flow_operations *o)
{
    fprintf(stderr, "chunks: on_error %d\n", (int)o->status);
    exit(1);
}

static neat_error_code on_all_written(struct neat_flow_operations *o)
{
    (void)o;
    neat_close(ctx, flow);
    return NEAT_OK;
}

static neat_error_code on_writable(struct neat_flow_operations *o)
{
    unsigned char chunk[CHUNK];
    struct neat_tlv opt[1];
    if (chunks_left == 0)
        return NEAT_OK;
    memset(chunk, 'N', sizeof chunk);
    opt[0].tag = NEAT_TAG_STREAM_ID;
    opt[0].type = NEAT_TYPE_INTEGER;
    opt[0].value.integer = 0;
    if (neat_write(o->ctx, o->flow, chunk, sizeof chunk, opt, 1) != NEAT_OK)
        return on_error(o);
    if (--chunks_left == 0) {
        ops.on_all_written = on_all_written;
        neat_set_operations(ctx, flow, &ops);
    }
    return NEAT_OK;
}

static neat_error_code on_connected(struct neat_flow_operations *o)
{
    (void)o;
    ops.on_writable = on_writable;
    neat_set_operations(ctx, flow, &ops);
    return NEAT_OK;
}

static neat_error_code on_close(struct neat_flow_operations *o)
{
    ops.on_writable = NULL;
    ops.on_close = NULL;
    neat_set_operations(ctx, flow, &ops);
    neat_stop_event_loop(o->ctx);
    return NEAT_OK;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: chunks HOST PORT PROPERTIES N\n");
        return 2;
    }
    chunks_left = atol(argv[4]);
    memset(&ops, 0, sizeof ops);
    ctx = neat_init_ctx();
    flow = neat_new_flow(ctx);
    neat_log_level(ctx, NEAT_LOG_WARNING);
    if (neat_set_property(ctx, flow, argv[3]) != NEAT_OK)
        return 2;
    ops.on_connected = on_connected;
    ops.on_error = on_error;
    ops.on_close = on_close;
    neat_set_operations(ctx, flow, &ops);
    if (neat_open(ctx, flow, argv[1], (uint16_t)atoi(argv[2]), NULL, 0) != NEAT_OK)
        return 2;
    neat_start_event_loop(ctx, NEAT_RUN_DEFAULT);
    printf("chunks written: %ld left\n", chunks_left);
    fflush(stdout);
    neat_free_ctx(ctx);
    exit(0);
}
