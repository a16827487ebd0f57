/*
 * neat.h: the NEAT C API, served by taps (libneat.so.1 / libneat.a).
 *
 * Written for taps from the interface of NEAT 1.0.9 (names, values and layout are
 * what existing NEAT programs compile against), so those programs build and run
 * unchanged. Semantics and the differences from NEAT: docs/capi.md.
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef NEAT_H
#define NEAT_H

/* NEAT programs rely on these three being pulled in by neat.h. */
#include <sys/types.h>
#include <netinet/in.h>
#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEAT_EXTERN __attribute__((__visibility__("default")))

/* ---- Results ------------------------------------------------------------------ */

/** Every call that can fail returns one of the NEAT_ERROR_* codes below. */
typedef uint64_t neat_error_code;

#define NEAT_ERROR_OK (0)
#define NEAT_OK NEAT_ERROR_OK
#define NEAT_ERROR_WOULD_BLOCK (1)
#define NEAT_ERROR_BAD_ARGUMENT (2)
#define NEAT_ERROR_IO (3)
#define NEAT_ERROR_DNS (4)
#define NEAT_ERROR_INTERNAL (5)
#define NEAT_ERROR_SECURITY (6)
#define NEAT_ERROR_UNABLE (7)
#define NEAT_ERROR_MESSAGE_TOO_BIG (8)
#define NEAT_ERROR_REMOTE (9)
#define NEAT_ERROR_OUT_OF_MEMORY (10)

#define NEAT_INVALID_STREAM (-1)

/* ---- Log levels (neat_log_level) ---------------------------------------------- */

#define NEAT_LOG_OFF (0)
#define NEAT_LOG_ERROR (1)
#define NEAT_LOG_WARNING (2)
#define NEAT_LOG_INFO (3)
#define NEAT_LOG_DEBUG (4)

/* ---- Certificate kinds (neat_secure_identity) ---------------------------------- */

#define NEAT_CERT_NONE 0
#define NEAT_CERT_PEM 1
#define NEAT_KEY_PEM 2
#define NEAT_CERT_KEY_PEM 3

/* ---- Context and event loop ---------------------------------------------------- */

/** How neat_start_event_loop runs the loop; the values are libuv's uv_run_mode. */
typedef enum {
    NEAT_RUN_DEFAULT = 0,
    NEAT_RUN_ONCE = 1,
    NEAT_RUN_NOWAIT = 2
} neat_run_mode;

/** A context: one event loop and the flows on it. Opaque. */
struct neat_ctx;
/** A flow: one connection, listener or datagram peer. Opaque. */
struct neat_flow;

NEAT_EXTERN struct neat_ctx *neat_init_ctx(void);
NEAT_EXTERN neat_error_code neat_start_event_loop(struct neat_ctx *nc, neat_run_mode run_mode);
NEAT_EXTERN void neat_stop_event_loop(struct neat_ctx *nc);
NEAT_EXTERN uv_loop_t *neat_get_event_loop(struct neat_ctx *ctx);
NEAT_EXTERN int neat_get_backend_fd(struct neat_ctx *nc);
NEAT_EXTERN int neat_get_backend_timeout(struct neat_ctx *nc);
NEAT_EXTERN void neat_free_ctx(struct neat_ctx *nc);
NEAT_EXTERN void neat_log_level(struct neat_ctx *ctx, uint8_t level);
NEAT_EXTERN uint8_t neat_log_file(struct neat_ctx *ctx, const char *file_name);

/* ---- Callbacks ------------------------------------------------------------------ */

struct neat_flow_operations;

/** Flow callback: gets the flow's own operations, with status, stream_id, ctx, flow set. */
typedef neat_error_code (*neat_flow_operations_fx)(struct neat_flow_operations *);
/** (ops, ecn, rate): never called. */
typedef void (*neat_cb_flow_slowdown_t)(struct neat_flow_operations *, int, uint32_t);
/** (ops, new_rate): never called. */
typedef void (*neat_cb_flow_rate_hint_t)(struct neat_flow_operations *, uint32_t);
/** (ops, context, unsent): never called. */
typedef void (*neat_cb_send_failure_t)(struct neat_flow_operations *, int, const unsigned char *);

/*
 * The application owns this struct (zero it, fill in callbacks, pass it to
 * neat_set_operations, which copies it into the flow). Callbacks receive the flow's copy,
 * which lives as long as the flow; editing its fields in a callback takes effect at once.
 * Layout (x86-64): 176 bytes; userData at 24, status 32, stream_id 40,
 * transport_protocol 44, on_connected 48, label 152, ctx 160, flow 168.
 */
struct neat_flow_operations {
    uint32_t preconnection_id;
    uint32_t rendezvous_id;
    uint32_t connection_id;
    uint32_t parent_id;
    uint32_t clone_id;

    void *userData;

    neat_error_code status;
    uint16_t stream_id;
    int transport_protocol;

    neat_flow_operations_fx on_connected;
    neat_flow_operations_fx on_error;
    neat_flow_operations_fx on_readable;
    neat_flow_operations_fx on_writable;
    neat_flow_operations_fx on_all_written;
    neat_flow_operations_fx on_network_status_changed;
    neat_flow_operations_fx on_aborted;
    neat_flow_operations_fx on_timeout;
    neat_flow_operations_fx on_close;
    neat_flow_operations_fx on_parameters;
    neat_cb_send_failure_t on_send_failure;
    neat_cb_flow_slowdown_t on_slowdown;
    neat_cb_flow_rate_hint_t on_rate_hint;
    char *label;

    struct neat_ctx *ctx;
    struct neat_flow *flow;
};

/* ---- Optional arguments (tag, type, value) --------------------------------------- */

enum neat_tlv_type {
    NEAT_TYPE_INTEGER = 0,
    NEAT_TYPE_FLOAT = 1,
    NEAT_TYPE_STRING = 2
};
typedef enum neat_tlv_type neat_tlv_type;

enum neat_tlv_tag {
    NEAT_TAG_STREAM_ID = 0,
    NEAT_TAG_STREAM_COUNT = 1,
    NEAT_TAG_LOCAL_NAME = 2,
    NEAT_TAG_LOCAL_ADDRESS = 3,
    NEAT_TAG_SERVICE_NAME = 4,
    NEAT_TAG_CONTEXT = 5,
    NEAT_TAG_PARTIAL_RELIABILITY_METHOD = 6,
    NEAT_TAG_PARTIAL_RELIABILITY_VALUE = 7,
    NEAT_TAG_PARTIAL_MESSAGE_RECEIVED = 8,
    NEAT_TAG_PARTIAL_SEQNUM = 9,
    NEAT_TAG_UNORDERED = 10,
    NEAT_TAG_UNORDERED_SEQNUM = 11,
    NEAT_TAG_DESTINATION_IP_ADDRESS = 12,
    NEAT_TAG_PRIORITY = 13,
    NEAT_TAG_FLOW_GROUP = 14,
    NEAT_TAG_CC_ALGORITHM = 15,
    NEAT_TAG_TRANSPORT_STACK = 16,
    NEAT_TAG_CHANNEL_NAME = 17,

    NEAT_TAG_LAST = 18
};
typedef enum neat_tlv_tag neat_tlv_tag;

/** One optional argument (16 bytes on x86-64). */
struct neat_tlv {
    neat_tlv_tag tag;
    neat_tlv_type type;
    union {
        int integer;
        char *string;
        float real;
    } value;
};

/* Protocol stacks (NEAT_TAG_TRANSPORT_STACK, ops.transport_protocol). */
typedef enum {
    NEAT_STACK_UDP = 1,
    NEAT_STACK_UDPLITE = 2,
    NEAT_STACK_TCP = 3,
    NEAT_STACK_MPTCP = 4,
    NEAT_STACK_SCTP = 5,
    NEAT_STACK_SCTP_UDP = 6,
    NEAT_STACK_WEBRTC = 7
} neat_protocol_stack_type;

/*
 * Optional-argument helpers. In a function:
 *     NEAT_OPTARGS_DECLARE(NEAT_OPTARGS_MAX);
 *     NEAT_OPTARGS_INIT();
 *     NEAT_OPTARG_INT(NEAT_TAG_STREAM_ID, 1);
 *     neat_write(ctx, flow, buf, len, NEAT_OPTARGS, NEAT_OPTARGS_COUNT);
 * With <assert.h> included first, adding past the declared size asserts.
 */
#define NEAT_OPTARGS (neat_optargs_)
#define NEAT_OPTARGS_COUNT (neat_optargs_count_)
#define NEAT_OPTARGS_MAX (NEAT_TAG_LAST)

#define NEAT_OPTARGS_INIT()          \
    do {                             \
        NEAT_OPTARGS_COUNT = 0;      \
    } while (0);
#define NEAT_OPTARGS_RESET NEAT_OPTARGS_INIT

#ifdef assert
#define NEAT_OPTARGS_DECLARE(max)                         \
    struct neat_tlv neat_optargs_storage_[max];           \
    struct neat_tlv *NEAT_OPTARGS = neat_optargs_storage_; \
    unsigned int NEAT_OPTARGS_COUNT;                      \
    unsigned int neat_optargs_limit_ = (max);
#define NEAT_OPTARG_CHECK_() assert(NEAT_OPTARGS_COUNT < neat_optargs_limit_)
#else
#define NEAT_OPTARGS_DECLARE(max)                         \
    struct neat_tlv neat_optargs_storage_[max];           \
    struct neat_tlv *NEAT_OPTARGS = neat_optargs_storage_; \
    unsigned int NEAT_OPTARGS_COUNT;
#define NEAT_OPTARG_CHECK_() ((void)0)
#endif

#define NEAT_OPTARG_SET_(tagname, kind, field, val)          \
    do {                                                     \
        NEAT_OPTARG_CHECK_();                                \
        NEAT_OPTARGS[NEAT_OPTARGS_COUNT].tag = (tagname);    \
        NEAT_OPTARGS[NEAT_OPTARGS_COUNT].type = (kind);      \
        NEAT_OPTARGS[NEAT_OPTARGS_COUNT].value.field = (val); \
        NEAT_OPTARGS_COUNT++;                                \
    } while (0);
#define NEAT_OPTARG_INT(tagname, val) NEAT_OPTARG_SET_(tagname, NEAT_TYPE_INTEGER, integer, val)
#define NEAT_OPTARG_FLOAT(tagname, val) NEAT_OPTARG_SET_(tagname, NEAT_TYPE_FLOAT, real, val)
#define NEAT_OPTARG_STRING(tagname, val) NEAT_OPTARG_SET_(tagname, NEAT_TYPE_STRING, string, val)

/* ---- Flows ------------------------------------------------------------------------ */

NEAT_EXTERN struct neat_flow *neat_new_flow(struct neat_ctx *ctx);
NEAT_EXTERN neat_error_code neat_set_operations(struct neat_ctx *ctx, struct neat_flow *flow,
                                                struct neat_flow_operations *ops);
NEAT_EXTERN neat_error_code neat_set_property(struct neat_ctx *ctx, struct neat_flow *flow,
                                              const char *properties);
NEAT_EXTERN neat_error_code neat_get_property(struct neat_ctx *ctx, struct neat_flow *flow,
                                              const char *name, void *ptr, size_t *size);
NEAT_EXTERN neat_error_code neat_open(struct neat_ctx *ctx, struct neat_flow *flow,
                                      const char *name, uint16_t port,
                                      struct neat_tlv optional[], unsigned int opt_count);
NEAT_EXTERN neat_error_code neat_accept(struct neat_ctx *ctx, struct neat_flow *flow,
                                        uint16_t port, struct neat_tlv optional[],
                                        unsigned int opt_count);
NEAT_EXTERN neat_error_code neat_read(struct neat_ctx *ctx, struct neat_flow *flow,
                                      unsigned char *buffer, uint32_t amt, uint32_t *actualAmt,
                                      struct neat_tlv optional[], unsigned int opt_count);
NEAT_EXTERN neat_error_code neat_write(struct neat_ctx *ctx, struct neat_flow *flow,
                                       const unsigned char *buffer, uint32_t amt,
                                       struct neat_tlv optional[], unsigned int opt_count);
NEAT_EXTERN neat_error_code neat_shutdown(struct neat_ctx *ctx, struct neat_flow *flow);
NEAT_EXTERN neat_error_code neat_close(struct neat_ctx *ctx, struct neat_flow *flow);
NEAT_EXTERN neat_error_code neat_abort(struct neat_ctx *ctx, struct neat_flow *flow);

/* ---- Tuning and information ---------------------------------------------------------- */

NEAT_EXTERN neat_error_code neat_get_stats(struct neat_ctx *ctx, char **neat_stats);
NEAT_EXTERN int neat_getlpaddrs(struct neat_ctx *ctx, struct neat_flow *flow,
                                struct sockaddr **addrs, const int local);
NEAT_EXTERN void neat_freelpaddrs(struct sockaddr *addrs);
NEAT_EXTERN neat_error_code neat_change_timeout(struct neat_ctx *ctx, struct neat_flow *flow,
                                                unsigned int seconds);
NEAT_EXTERN neat_error_code neat_set_primary_dest(struct neat_ctx *ctx, struct neat_flow *flow,
                                                  const char *name);
NEAT_EXTERN neat_error_code neat_set_checksum_coverage(struct neat_ctx *ctx, struct neat_flow *flow,
                                                       unsigned int send_coverage,
                                                       unsigned int receive_coverage);
/* A PEM file with certificate and key. */
NEAT_EXTERN neat_error_code neat_secure_identity(struct neat_ctx *ctx, struct neat_flow *flow,
                                                 const char *filename, int pemType);
NEAT_EXTERN neat_error_code neat_set_qos(struct neat_ctx *ctx, struct neat_flow *flow, uint8_t qos);
NEAT_EXTERN int neat_get_qos(struct neat_ctx *ctx, struct neat_flow *flow);
NEAT_EXTERN neat_error_code neat_set_ecn(struct neat_ctx *ctx, struct neat_flow *flow, uint8_t ecn);
NEAT_EXTERN neat_error_code neat_set_low_watermark(struct neat_ctx *ctx, struct neat_flow *flow,
                                                   uint32_t watermark);
NEAT_EXTERN int neat_get_socket_fd(struct neat_flow *nf);
NEAT_EXTERN neat_error_code neat_get_stack(struct neat_flow *flow, void *ptr, size_t *size);
NEAT_EXTERN void neat_get_max_buffer_sizes(struct neat_flow *flow, int *send, int *recv);
NEAT_EXTERN void set_initiate_timer(struct neat_ctx *nc, struct neat_flow *flow,
                                    struct neat_flow_operations *ops, float timeout);
NEAT_EXTERN void set_ops_user_data(struct neat_flow_operations *ops, unsigned char *data);
NEAT_EXTERN unsigned char *get_ops_user_data(struct neat_flow_operations *ops);
NEAT_EXTERN neat_error_code neat_send_remote_parameters(struct neat_ctx *ctx, struct neat_flow *flow,
                                                        char *params);

#ifdef __cplusplus
}
#endif
#endif /* NEAT_H */
