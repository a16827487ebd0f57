//! The client of experiment 1: from context creation to the last of N concurrent flows
//! connected.

#![forbid(unsafe_code)]

use std::sync::Arc;

use taps::{Preconnection, RemoteEndpoint};

use super::flow::{open_flows, Dial};
use super::{ready, send_result, Window};
use crate::worker::protocol::{ClientResult, Impl, Target};
use crate::worker::setup::{client_context, client_properties};

/// Experiment 1's client: see [`crate::worker::ClientSpec::Connect`].
pub(super) async fn connect_client(t: Target, flows: usize) -> Result<(), String> {
    ready().await?;
    let mut r = ClientResult::default();
    let w = Window::open();
    let held = match t.imp {
        Impl::Taps => {
            let ctx = client_context(t.udp_port, t.mapping, None)?;
            let pre = Preconnection::new(&ctx, client_properties(t.proto)?)
                .remote(RemoteEndpoint::new("127.0.0.1", t.port));
            let flows = open_flows(&Dial::Taps(Arc::new(pre)), flows, &mut r).await;
            w.close(&mut r);
            (flows, Some(ctx))
        }
        Impl::Raw => {
            let flows = open_flows(&Dial::raw(t.proto, t.port, t.udp_port), flows, &mut r).await;
            w.close(&mut r);
            (flows, None)
        }
    };
    send_result(&r).await?;
    drop(held);
    Ok(())
}
