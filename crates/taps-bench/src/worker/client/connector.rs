//! How the clients of experiments 3 and 4 connect, one connection at a time.

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use taps::taps_core::policy::CibConfig;
use taps::taps_core::Family;
use taps::TransportProperties;
use taps::{Context, Preconnection, Preference, Protocol};

use super::flow::{Dial, Flow};
use crate::worker::protocol::{ClientKind, Proto};
use crate::worker::setup::{
    client_context, client_properties, compile, preconnection, race_properties,
};

/// How the clients of experiments 3 and 4 connect: raw, taps to a literal with one
/// protocol, or taps racing with a seeded context (hits) and a context whose CIB forgets
/// at once (misses). Every taps context has flow mapping off, so every connection is a
/// race (or a single attempt) of its own.
pub(super) struct Connector {
    kind: ClientKind,
    raw: Option<Dial>,
    single: Option<Arc<Preconnection>>,
    hit: Option<Arc<Preconnection>>,
    miss: Option<Arc<Preconnection>>,
    contexts: Vec<Context>,
}

/// One connection made by a [`Connector`].
pub(super) struct Connected {
    /// The flow (none for a resolution alone).
    pub(super) flow: Option<Flow>,
    /// Connection attempts it took.
    pub(super) attempts: usize,
    /// Whether it ended up on SCTP.
    pub(super) sctp: bool,
}

impl Connector {
    /// Sets up the contexts and preconnections of `kind` (seeding the CIB for races).
    pub(super) async fn new(
        kind: ClientKind,
        port: u16,
        udp_port: u16,
    ) -> Result<Connector, String> {
        let mut c = Connector {
            kind,
            raw: None,
            single: None,
            hit: None,
            miss: None,
            contexts: Vec::new(),
        };
        match kind {
            ClientKind::RawTcp => c.raw = Some(Dial::raw(Proto::Tcp, port, udp_port)),
            ClientKind::RawSctp => c.raw = Some(Dial::raw(Proto::Sctp, port, udp_port)),
            ClientKind::TapsResolveOnly => c.contexts.push(client_context(0, false, None)?),
            ClientKind::TapsSingleName => {
                let ctx = client_context(0, false, None)?;
                let props = compile(
                    TransportProperties::new()
                        .protocols(Preference::Require, [Protocol::Tcp])
                        .ip_version(Preference::Require, Family::V4),
                )?;
                c.single = Some(preconnection(&ctx, props, "localhost", port)?);
                c.contexts.push(ctx);
            }
            ClientKind::TapsSingle | ClientKind::TapsSctp => {
                let (proto, udp) = if kind == ClientKind::TapsSctp {
                    (Proto::Sctp, udp_port)
                } else {
                    (Proto::Tcp, 0)
                };
                let ctx = client_context(udp, false, None)?;
                c.single = Some(preconnection(
                    &ctx,
                    client_properties(proto)?,
                    "127.0.0.1",
                    port,
                )?);
                c.contexts.push(ctx);
            }
            ClientKind::TapsRace | ClientKind::TapsFamilyRace => {
                let (props, host, udp) = if kind == ClientKind::TapsRace {
                    (race_properties()?, "127.0.0.1", udp_port)
                } else {
                    (client_properties(Proto::Tcp)?, "localhost", 0)
                };
                let hit_ctx = client_context(udp, false, None)?;
                let forget = CibConfig {
                    lifetime: Duration::ZERO,
                    ..CibConfig::default()
                };
                let miss_ctx = client_context(udp, false, Some(forget))?;
                let hit = preconnection(&hit_ctx, props.clone(), host, port)?;
                // Seed the CIB the way an application would: by a preliminary connection.
                let seed = hit
                    .initiate()
                    .await
                    .map_err(|e| format!("seeding connection to {host}:{port}: {e}"))?;
                drop(seed);
                if hit_ctx.cib_len() == 0 {
                    return Err("the seeding connection left the CIB empty".into());
                }
                c.hit = Some(hit);
                c.miss = Some(preconnection(&miss_ctx, props, host, port)?);
                c.contexts.push(hit_ctx);
                c.contexts.push(miss_ctx);
            }
        }
        Ok(c)
    }

    /// Connects (a cache hit or a miss, for races).
    pub(super) async fn connect(&self, hit: bool) -> Result<Connected, String> {
        let pre = match self.kind {
            ClientKind::TapsResolveOnly => {
                let ctx = self.contexts.first().ok_or("connector not set up")?;
                let mut resolution = ctx.resolver().resolve("localhost");
                let mut any = false;
                while let Some(answer) = resolution.next().await {
                    any |= answer.result.is_ok();
                }
                return if any {
                    Ok(Connected {
                        flow: None,
                        attempts: 0,
                        sctp: false,
                    })
                } else {
                    Err("localhost did not resolve".into())
                };
            }
            ClientKind::RawTcp | ClientKind::RawSctp => {
                let flow = self
                    .raw
                    .as_ref()
                    .ok_or("connector not set up")?
                    .open()
                    .await?;
                return Ok(Connected {
                    attempts: 1,
                    sctp: flow.is_sctp(),
                    flow: Some(flow),
                });
            }
            ClientKind::TapsSingle | ClientKind::TapsSctp | ClientKind::TapsSingleName => {
                self.single.as_ref()
            }
            ClientKind::TapsRace | ClientKind::TapsFamilyRace if hit => self.hit.as_ref(),
            ClientKind::TapsRace | ClientKind::TapsFamilyRace => self.miss.as_ref(),
        };
        let pre = pre.ok_or("connector not set up")?;
        let c = pre.initiate().await.map_err(|e| e.to_string())?;
        let flow = Flow::Taps(c);
        Ok(Connected {
            attempts: flow.attempts(),
            sctp: flow.is_sctp(),
            flow: Some(flow),
        })
    }
}
