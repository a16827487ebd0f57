/* Closes flows from every callback, and twice: close_everywhere PORT
 * One process: an echo server on PORT and five clients (TCP), each closing itself in a
 * different callback: on_connected, on_writable, on_all_written, on_readable, on_error
 * (the last one connects to PORT+1, where nothing listens). Each closes twice; on_close
 * must run exactly once per flow. Exit 0 when all is as expected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "neat.h"

#define TCP "{\"transport\":{\"value\":\"TCP\",\"precedence\":2}}"
enum { AT_CONNECTED, AT_WRITABLE, AT_ALL_WRITTEN, AT_READABLE, AT_ERROR, CLIENTS };
static const char *names[] = { "on_connected", "on_writable", "on_all_written", "on_readable", "on_error" };
static int closes[CLIENTS], tags[CLIENTS];
static int clients_closed;

static void close_twice(struct neat_flow_operations *ops)
{
    if (neat_close(ops->ctx, ops->flow) != NEAT_OK || neat_close(ops->ctx, ops->flow) != NEAT_OK) {
        fprintf(stderr, "neat_close failed\n");
        exit(7);
    }
}

static neat_error_code c_close(struct neat_flow_operations *ops)
{
    int who = *(int *)ops->userData;
    closes[who]++;
    /* closing again from on_close itself must be harmless */
    neat_close(ops->ctx, ops->flow);
    if (++clients_closed == CLIENTS)
        neat_stop_event_loop(ops->ctx);
    return NEAT_OK;
}

static neat_error_code c_error(struct neat_flow_operations *ops)
{
    int who = *(int *)ops->userData;
    if (who != AT_ERROR) {
        fprintf(stderr, "unexpected on_error on client %s\n", names[who]);
        exit(8);
    }
    close_twice(ops);
    return NEAT_OK;
}

static neat_error_code c_readable(struct neat_flow_operations *ops)
{
    unsigned char buf[64];
    uint32_t n;
    if (neat_read(ops->ctx, ops->flow, buf, sizeof buf, &n, NULL, 0) == NEAT_OK)
        close_twice(ops);
    return NEAT_OK;
}

static neat_error_code c_all_written(struct neat_flow_operations *ops)
{
    close_twice(ops);
    return NEAT_OK;
}

static neat_error_code c_writable(struct neat_flow_operations *ops)
{
    int who = *(int *)ops->userData;
    if (who == AT_WRITABLE) {
        close_twice(ops);
        return NEAT_OK;
    }
    neat_write(ops->ctx, ops->flow, (const unsigned char *)"ping", 4, NULL, 0);
    ops->on_writable = NULL;
    if (who == AT_ALL_WRITTEN)
        ops->on_all_written = c_all_written;
    else
        ops->on_readable = c_readable;
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

static neat_error_code c_connected(struct neat_flow_operations *ops)
{
    int who = *(int *)ops->userData;
    if (who == AT_CONNECTED) {
        close_twice(ops);
        return NEAT_OK;
    }
    ops->on_writable = c_writable;
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

/* the server echoes */
static neat_error_code s_readable(struct neat_flow_operations *ops)
{
    unsigned char buf[64];
    uint32_t n;
    if (neat_read(ops->ctx, ops->flow, buf, sizeof buf, &n, NULL, 0) == NEAT_OK)
        neat_write(ops->ctx, ops->flow, buf, n, NULL, 0);
    return NEAT_OK;
}

static neat_error_code s_connected(struct neat_flow_operations *ops)
{
    ops->on_readable = s_readable;
    neat_set_operations(ops->ctx, ops->flow, ops);
    return NEAT_OK;
}

static neat_error_code s_error(struct neat_flow_operations *ops)
{
    fprintf(stderr, "server on_error %d\n", (int)ops->status);
    exit(9);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    uint16_t port = (uint16_t)atoi(argv[1]);
    struct neat_ctx *ctx = neat_init_ctx();
    neat_log_level(ctx, NEAT_LOG_OFF);
    struct neat_flow *server = neat_new_flow(ctx);
    struct neat_flow_operations sops, cops[CLIENTS];
    memset(&sops, 0, sizeof sops);
    memset(cops, 0, sizeof cops);
    sops.on_connected = s_connected;
    sops.on_error = s_error;
    neat_set_property(ctx, server, TCP);
    neat_set_operations(ctx, server, &sops);
    if (neat_accept(ctx, server, port, NULL, 0) != NEAT_OK)
        return 2;
    for (int i = 0; i < CLIENTS; i++) {
        struct neat_flow *f = neat_new_flow(ctx);
        tags[i] = i;
        cops[i].userData = &tags[i];
        cops[i].on_connected = c_connected;
        cops[i].on_error = c_error;
        cops[i].on_close = c_close;
        neat_set_property(ctx, f, TCP);
        neat_set_operations(ctx, f, &cops[i]);
        if (neat_open(ctx, f, "127.0.0.1", i == AT_ERROR ? port + 1 : port, NULL, 0) != NEAT_OK)
            return 2;
    }
    neat_start_event_loop(ctx, NEAT_RUN_DEFAULT);
    int bad = 0;
    for (int i = 0; i < CLIENTS; i++) {
        printf("closed in %s: on_close ran %d time(s)\n", names[i], closes[i]);
        bad |= closes[i] != 1;
    }
    neat_free_ctx(ctx);
    return bad;
}
