//! The exports that act on an SCTP flow's paths.

use std::ffi::c_char;
use std::net::{IpAddr, SocketAddr};

use crate::boundary::{self, export};
use crate::core::State;
use crate::task::{self, Cmd};
use crate::types::*;
use crate::{NeatCtx, NeatFlow};

/// Makes the path to the peer's address `name` (an IPv4 or IPv6 literal; the port is the
/// flow's) the SCTP association's primary path. As NEAT: NEAT_ERROR_UNABLE on a flow that
/// is not SCTP, NEAT_ERROR_BAD_ARGUMENT for a name that is not an address literal.
/// Unlike NEAT, which answers NEAT_OK before it tries, the answer is the outcome:
/// NEAT_ERROR_BAD_ARGUMENT (and an error logged naming the address) when it is not the
/// peer's end of one of the association's paths, NEAT_ERROR_IO when usrsctp refuses it
/// (an unconfirmed path). One round trip to the flow's task.
///
/// # Safety
/// Pointers are NULL or live; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn neat_set_primary_dest(
    nc: *mut NeatCtx,
    flow: *mut NeatFlow,
    name: *const c_char,
) -> NeatError {
    export(|| {
        let (ctx, f) = boundary::flow(nc, flow)?;
        let name = boundary::text(name)?;
        let info = match (f.state, f.peer.info) {
            (State::Open, Some(info)) if info.stack == NEAT_STACK_SCTP => info,
            _ => return Err(NEAT_ERROR_UNABLE),
        };
        let Ok(ip) = name.parse::<IpAddr>() else {
            ctx.log(
                NEAT_LOG_ERROR,
                format_args!("neat_set_primary_dest: '{name}' is not an address literal"),
            );
            return Err(NEAT_ERROR_BAD_ARGUMENT);
        };
        let remote = SocketAddr::new(ip, info.remote.port());
        match task::ask(&f.shared, |tx| Cmd::SetPrimary(remote, tx)) {
            Some(Ok(())) => Ok(()),
            Some(Err(taps::Error::Setup(taps::SetupError::Usage(e)))) => {
                ctx.log(NEAT_LOG_ERROR, format_args!("neat_set_primary_dest: {e}"));
                Err(NEAT_ERROR_BAD_ARGUMENT)
            }
            Some(Err(e)) => {
                ctx.log(NEAT_LOG_ERROR, format_args!("neat_set_primary_dest: {e}"));
                Err(NEAT_ERROR_IO)
            }
            None => Err(NEAT_ERROR_IO),
        }
    })
}
