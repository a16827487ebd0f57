//! Exports that make flows and start them: new flow, operations, properties, open
//! (client) and accept (listener).

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use crate::boundary::{self, export};
use crate::core::{Ctx, Flow, State};
use crate::props::PropSet;
use crate::types::*;
use crate::{guard, task, NeatCtx, NeatFlow};

/// A new flow on the context (not yet opened or accepting).
///
/// # Safety
/// `nc` is NULL or a live context.
#[no_mangle]
pub unsafe extern "C" fn neat_new_flow(nc: *mut NeatCtx) -> *mut NeatFlow {
    guard(std::ptr::null_mut(), || match boundary::context(nc) {
        Ok(ctx) => ctx.new_flow().cast(),
        Err(_) => std::ptr::null_mut(),
    })
}

/// Copies `ops` into the flow (unless it is the flow's own copy), keeping the flow's
/// transport_protocol; the next loop iteration sees the new callbacks.
///
/// # Safety
/// Pointers are NULL or live; `ops` points to a whole `struct neat_flow_operations`.
#[no_mangle]
pub unsafe extern "C" fn neat_set_operations(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    ops: *mut c_void,
) -> NeatError {
    export(|| {
        let (_, fp) = boundary::flow_ptrs(nc, flow)?;
        // The program may pass the flow's own operations back (what callbacks get).
        let given = boundary::operations_unless_own(ops, fp)?;
        let (ctx, f) = boundary::flow(nc, flow)?;
        if let Some(given) = given {
            let keep = f.ops.transport_protocol;
            f.ops = given;
            f.ops.transport_protocol = keep;
        }
        f.ops.ctx = nc.cast();
        f.ops.flow = flow.cast();
        if f.state != State::Closed {
            ctx.mark(f.id);
        }
        Ok(())
    })
}

/// Properties in NEAT's JSON (value/precedence objects or the list form), added to the
/// flow's (a later property replaces an earlier one of the same name). Properties taps
/// does not know, or cannot take, are ignored with a log line, as NEAT did, unless
/// required: then the flow fails when it opens or listens (see `src/props.rs`). A
/// text is parsed once per context (the cache holds 64).
///
/// # Safety
/// Pointers are NULL or live; `properties` is a C string.
#[no_mangle]
pub unsafe extern "C" fn neat_set_property(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    properties: *const c_char,
) -> NeatError {
    export(|| {
        let (ctx, f) = boundary::flow(nc, flow)?;
        let text = boundary::text(properties)?;
        let set = prop_set(ctx, &text).map_err(|e| {
            ctx.log(NEAT_LOG_ERROR, format_args!("{e}"));
            NEAT_ERROR_BAD_ARGUMENT
        })?;
        f.props.push(set);
        Ok(())
    })
}

/// The parsed property set of `text`, parsed and checked on its first use in the
/// context (what cannot be honoured is logged then, and fails the flow when it opens or
/// listens); `Err` when the text is not a JSON object.
fn prop_set(ctx: &mut Ctx, text: &str) -> Result<Arc<PropSet>, String> {
    if let Some(set) = ctx.prop_sets.get(text) {
        return Ok(set.clone());
    }
    let set = Arc::new(PropSet::parse(text, |error, msg| {
        let level = if error {
            NEAT_LOG_ERROR
        } else {
            NEAT_LOG_WARNING
        };
        ctx.log(level, format_args!("{msg}"));
    })?);
    if ctx.prop_sets.len() >= crate::core::CACHE_SIZE {
        ctx.prop_sets.clear();
    }
    ctx.prop_sets.insert(set.text.clone(), set.clone());
    Ok(set)
}

/// The client preconnection for `f` to `host`:`port`, shared by the context's flows
/// opened alike (same property texts, remote and security files): its plan is made and
/// its properties compiled once, not per flow.
fn client_preconnection(
    ctx: &mut Ctx,
    f: &Flow,
    host: &str,
    port: u16,
) -> Result<Arc<taps::Preconnection>, String> {
    // The texts, the remote and the identity files, each ended by a NUL (which none of
    // them holds).
    let mut key = String::with_capacity(160);
    for part in f.props.iter().map(|set| &*set.text).chain([host]) {
        key.push_str(part);
        key.push('\0');
    }
    key.push_str(&port.to_string());
    for file in [&f.tls.cert_pem, &f.tls.key_pem, &f.tls.cert_key_pem] {
        key.push('\0');
        key.push_str(file.as_deref().unwrap_or(""));
    }
    if let Some(pre) = ctx.preconnections.get(&key) {
        return Ok(pre.clone());
    }
    let props = crate::props::compile(&f.props, taps::TransportProperties::new())?;
    let pre = Arc::new(
        taps::Preconnection::new(&ctx.taps, props)
            .remote(taps::RemoteEndpoint::new(host, port))
            .security(security(ctx, f, Side::Client)),
    );
    if ctx.preconnections.len() >= crate::core::CACHE_SIZE {
        ctx.preconnections.clear();
    }
    ctx.preconnections.insert(key, pre.clone());
    Ok(pre)
}

/// Ignores optional arguments this call cannot use, with a log line.
fn note_tlvs(ctx: &Ctx, call: &str, tlvs: &[NeatTlv]) {
    for t in tlvs {
        ctx.log(
            NEAT_LOG_DEBUG,
            format_args!("{call}: optional argument tag {} ignored", t.tag),
        );
    }
}

/// Names this flow's certificate and key (PEM files) for TLS: NEAT_CERT_KEY_PEM for
/// one file holding both (what NEAT's TLS servers use), NEAT_CERT_PEM and NEAT_KEY_PEM
/// for separate files. Files are read when the flow opens or listens (a bad file is then
/// an error naming it: on_error, or NEAT_ERROR_BAD_ARGUMENT from neat_accept).
///
/// # Safety
/// Pointers are NULL or live; `filename` is a C string.
#[no_mangle]
pub unsafe extern "C" fn neat_secure_identity(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    filename: *const c_char,
    pem_type: c_int,
) -> NeatError {
    export(|| {
        let (ctx, f) = boundary::flow(nc, flow)?;
        let name = boundary::text(filename)?.into_owned();
        match pem_type {
            NEAT_CERT_PEM => f.tls.cert_pem = Some(name),
            NEAT_KEY_PEM => f.tls.key_pem = Some(name),
            NEAT_CERT_KEY_PEM => f.tls.cert_key_pem = Some(name),
            NEAT_CERT_NONE => {}
            other => ctx.log(
                NEAT_LOG_WARNING,
                format_args!("neat_secure_identity: unknown kind {other} ignored"),
            ),
        }
        Ok(())
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

/// A boolean property as NEAT wrote it (`{"value": false}` or a bare `false`); the
/// last set that names it decides.
fn flag(f: &Flow, name: &str) -> Option<bool> {
    let (_, v) = f
        .props
        .iter()
        .rev()
        .find_map(|set| set.entries.iter().find(|(k, _)| k == name))?;
    v.get("value").unwrap_or(v).as_bool()
}

/// The flow's TLS parameters, used only if a secure stack runs (the `security`
/// property). The identity: separate certificate and key files if both were named,
/// else the one file holding both. Clients verify the server's certificate against the
/// system's trust store and the host name, as NEAT did (OpenSSL, `SSL_VERIFY_PEER` and
/// the flow's name); NEAT's `"verification": {"value": false}` property turns that off
/// for a client, as it did in NEAT, and maps to taps' explicitly named opt-out.
fn security(ctx: &Ctx, f: &Flow, side: Side) -> taps::SecurityParameters {
    let mut p = taps::SecurityParameters::new();
    let identity = match (&f.tls.cert_pem, &f.tls.key_pem, &f.tls.cert_key_pem) {
        (Some(c), Some(k), _) => Some((c, k)),
        (_, _, Some(both)) => Some((both, both)),
        (Some(c), None, None) => Some((c, c)),
        _ => None,
    };
    if let Some((cert, key)) = identity {
        p = p.identity(cert, key);
    }
    if side == Side::Client && flag(f, "verification") == Some(false) {
        ctx.log(
            NEAT_LOG_INFO,
            format_args!(
                "flow {}: certificate verification off (\"verification\": false)",
                f.id
            ),
        );
        p = p.danger_accept_any_certificate();
    }
    p
}

/// Starts connecting to `name`:`port` and returns at once; on_connected or on_error
/// follows from the loop.
///
/// # Safety
/// Pointers are NULL or live; `name` is a C string; `optional` holds `opt_count` TLVs.
#[no_mangle]
pub unsafe extern "C" fn neat_open(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    name: *const c_char,
    port: u16,
    optional: *mut c_void,
    opt_count: c_uint,
) -> NeatError {
    export(|| {
        let (ctx, f) = boundary::flow(nc, flow)?;
        let host = boundary::text(name)?.into_owned();
        if port == 0 || f.state != State::New {
            return Err(NEAT_ERROR_BAD_ARGUMENT);
        }
        note_tlvs(ctx, "neat_open", boundary::tlvs(optional, opt_count));
        let pre = match client_preconnection(ctx, f, &host, port) {
            Ok(p) => p,
            Err(e) => {
                // As NEAT: the open fails through on_error, not its return value.
                f.state = State::Opening;
                crate::core::post_error(ctx, f.id, NEAT_ERROR_UNABLE, format!("neat_open: {e}"));
                return Ok(());
            }
        };
        f.state = State::Opening;
        f.peer.host = host;
        f.peer.port = port;
        f.has_task = true;
        ctx.pending_opens.push(task::OpenRequest {
            pre,
            id: f.id,
            ctx: ctx.shared.clone(),
            shared: f.shared.clone(),
        });
        ctx.wake();
        Ok(())
    })
}

/// The properties a listener without any uses: every stack taps can run.
/// (RFC 9622's defaults would rule out the datagram stacks, so they become no
/// preference here.)
const ALL_STACKS: &str = r#"{"transport":{"value":["SCTP","TCP","MPTCP","UDP","UDP-Lite"],"precedence":2},
 "reliability":{"value":true,"precedence":0}, "preserveOrder":{"value":true,"precedence":0},
 "congestionControl":{"value":true,"precedence":0},
 "fullChecksumSend":{"value":true,"precedence":0}, "fullChecksumRecv":{"value":true,"precedence":0}}"#;

/// Listens on `port` (all addresses, both families) and returns; each accepted
/// connection becomes a new flow with the listener's callbacks and userData. A failed
/// bind is reported through on_error.
///
/// # Safety
/// Pointers are NULL or live; `optional` holds `opt_count` TLVs.
#[no_mangle]
pub unsafe extern "C" fn neat_accept(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    port: u16,
    optional: *mut c_void,
    opt_count: c_uint,
) -> NeatError {
    export(|| {
        let (ctx, f) = boundary::flow(nc, flow)?;
        if f.state != State::New {
            return Err(NEAT_ERROR_BAD_ARGUMENT);
        }
        note_tlvs(ctx, "neat_accept", boundary::tlvs(optional, opt_count));
        let mut base = taps::TransportProperties::for_listener();
        if f.props.is_empty() {
            base = base
                .merge_neat_json(ALL_STACKS)
                .unwrap_or_else(|_| taps::TransportProperties::for_listener());
        }
        f.peer.port = port;
        // From here the listener exists as far as the program is concerned; a failure
        // reaches it through on_error, as NEAT reported failed binds.
        f.state = State::Listening;
        let props = match crate::props::compile(&f.props, base) {
            Ok(p) => p,
            Err(e) => {
                crate::core::post_error(ctx, f.id, NEAT_ERROR_UNABLE, format!("neat_accept: {e}"));
                return Ok(());
            }
        };
        let pre = taps::Preconnection::new(&ctx.taps, props)
            .local(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))
            .security(security(ctx, f, Side::Server));
        // Bound before this returns (tneat -L opens its clients first). No callback
        // runs meanwhile.
        match crate::runtime::block_on(pre.listen()) {
            Ok(l) => {
                for (stack, addr) in l.local_addrs() {
                    ctx.log(NEAT_LOG_INFO, format_args!("listening: {stack} on {addr}"));
                }
                f.has_task = true;
                crate::runtime::runtime().spawn(task::accept(
                    l,
                    f.id,
                    ctx.shared.clone(),
                    f.shared.clone(),
                ));
            }
            Err(e) => crate::core::post_error(
                ctx,
                f.id,
                NEAT_ERROR_IO,
                format!("listen on port {port}: {e}"),
            ),
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn listener_without_properties_plans_every_stack() {
        let rt = crate::runtime::runtime();
        let _g = rt.enter();
        let ctx = taps::Context::new().unwrap();
        let props = taps::TransportProperties::for_listener()
            .merge_neat_json(super::ALL_STACKS)
            .unwrap()
            .compile()
            .unwrap();
        let pre = taps::Preconnection::new(&ctx, props);
        let plan = pre.plan().unwrap();
        let runnable: Vec<String> = plan
            .stacks()
            .iter()
            .filter(|s| s.unavailable.is_none())
            .map(|s| s.stack.to_string())
            .collect();
        for want in ["SCTP", "TCP", "UDP"] {
            assert!(
                runnable.iter().any(|s| s == want),
                "{want} not in {runnable:?}"
            );
        }
    }
}
