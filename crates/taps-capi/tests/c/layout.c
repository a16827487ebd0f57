/* Checks neat.h's layout and constants at compile time, then calls every export once. */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include "neat.h"

_Static_assert(sizeof(struct neat_flow_operations) == 176, "ops size");
_Static_assert(offsetof(struct neat_flow_operations, userData) == 24, "userData");
_Static_assert(offsetof(struct neat_flow_operations, status) == 32, "status");
_Static_assert(offsetof(struct neat_flow_operations, stream_id) == 40, "stream_id");
_Static_assert(offsetof(struct neat_flow_operations, transport_protocol) == 44, "transport_protocol");
_Static_assert(offsetof(struct neat_flow_operations, on_connected) == 48, "on_connected");
_Static_assert(offsetof(struct neat_flow_operations, on_parameters) == 120, "on_parameters");
_Static_assert(offsetof(struct neat_flow_operations, label) == 152, "label");
_Static_assert(offsetof(struct neat_flow_operations, ctx) == 160, "ctx");
_Static_assert(offsetof(struct neat_flow_operations, flow) == 168, "flow");
_Static_assert(sizeof(struct neat_tlv) == 16, "tlv size");
_Static_assert(offsetof(struct neat_tlv, value) == 8, "tlv value");
_Static_assert(sizeof(neat_error_code) == 8, "error code");
_Static_assert(NEAT_TAG_LAST == 18 && NEAT_TAG_TRANSPORT_STACK == 16, "tags");
_Static_assert(NEAT_ERROR_OUT_OF_MEMORY == 10 && NEAT_ERROR_MESSAGE_TOO_BIG == 8, "errors");
_Static_assert(NEAT_STACK_SCTP == 5 && NEAT_STACK_WEBRTC == 7, "stacks");
_Static_assert((int)NEAT_RUN_NOWAIT == (int)UV_RUN_NOWAIT && (int)NEAT_RUN_ONCE == (int)UV_RUN_ONCE, "run modes");

int main(void)
{
    NEAT_OPTARGS_DECLARE(NEAT_OPTARGS_MAX);
    NEAT_OPTARGS_INIT();
    NEAT_OPTARG_INT(NEAT_TAG_STREAM_ID, 3);
    NEAT_OPTARG_FLOAT(NEAT_TAG_PRIORITY, 0.5f);
    NEAT_OPTARG_STRING(NEAT_TAG_LOCAL_NAME, "x");
    assert(NEAT_OPTARGS_COUNT == 3 && NEAT_OPTARGS[0].value.integer == 3);

    struct neat_ctx *ctx = neat_init_ctx();
    assert(ctx);
    assert(neat_get_event_loop(ctx) != NULL);
    assert(neat_get_backend_fd(ctx) >= 0);
    neat_log_level(ctx, NEAT_LOG_ERROR);
    struct neat_flow *flow = neat_new_flow(ctx);
    assert(flow);
    /* bad arguments */
    assert(neat_set_property(NULL, flow, "{}") == NEAT_ERROR_BAD_ARGUMENT);
    assert(neat_set_property(ctx, flow, "not json") == NEAT_ERROR_BAD_ARGUMENT);
    assert(neat_open(ctx, NULL, "localhost", 1, NULL, 0) == NEAT_ERROR_BAD_ARGUMENT);
    assert(neat_write(ctx, flow, (const unsigned char *)"x", 1, NULL, 0) == NEAT_ERROR_BAD_ARGUMENT);
    unsigned char buf[4];
    uint32_t got = 9;
    assert(neat_read(ctx, flow, buf, sizeof buf, &got, NULL, 0) == NEAT_ERROR_WOULD_BLOCK && got == 0);
    /* unknown properties are ignored; both transport forms parse */
    assert(neat_set_property(ctx, flow, "{\"flow_size_bytes\":{\"value\":5},\"__he_delay\":{\"value\":20}}") == NEAT_OK);
    assert(neat_set_property(ctx, flow, "{\"transport\":[{\"value\":\"SCTP\",\"precedence\":1},{\"value\":\"TCP\",\"precedence\":1}]}") == NEAT_OK);
    assert(neat_set_property(ctx, flow, "{\"transport\":{\"value\":[\"TCP\"],\"precedence\":2}}") == NEAT_OK);
    /* files are named here and read when the flow opens or listens */
    assert(neat_secure_identity(ctx, flow, "cert.pem", NEAT_CERT_KEY_PEM) == NEAT_OK);
    assert(neat_secure_identity(ctx, flow, NULL, NEAT_CERT_PEM) == NEAT_ERROR_BAD_ARGUMENT);
    assert(neat_secure_identity(NULL, flow, "cert.pem", NEAT_CERT_PEM) == NEAT_ERROR_BAD_ARGUMENT);
    char *stats = NULL;
    assert(neat_get_stats(ctx, &stats) == NEAT_OK && stats);
    printf("%s\n", stats);
    free(stats);
    assert(neat_close(ctx, flow) == NEAT_OK);
    assert(neat_close(ctx, flow) == NEAT_OK);
    neat_free_ctx(ctx);
    printf("layout ok\n");
    return 0;
}
