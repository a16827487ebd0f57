//! taps: transport services on tokio.
//!
//! Ask for services (reliable, ordered, message-based, low latency, multipath, ...), not
//! protocols. taps ranks the stacks that give them ([`taps_core::candidates`]), races
//! them with Happy Eyeballs ([`taps_core::race`]) and hands back a [`Connection`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), taps::Error> {
//! use taps::{Context, Preconnection, RemoteEndpoint, TransportProperties};
//! let ctx = Context::new()?;
//! let props = TransportProperties::new().compile()?;
//! let conn = Preconnection::new(&ctx, props)
//!     .remote(RemoteEndpoint::new("localhost", 7400))
//!     .initiate()
//!     .await?;
//! println!("won: {}", conn.info().stack);
//! # Ok(()) }
//! ```
//!
//! Logs are [`tracing`] events and spans (races, attempts, causes); install a `tracing`
//! subscriber to see them. taps does not turn on `tracing`'s `log` feature (every span
//! entered and left would also consult the `log` logger, ~700 instructions per
//! connection); an application that wants them as `log` records enables it.
//!
//! With the cargo feature `http` (off by default: it pulls in hyper), `http::Connector`
//! gives hyper-util's legacy HTTP client the same races, CIB and reports.

mod connection;
mod context;
mod endpoint;
mod error;
mod framing;
#[cfg(feature = "http")]
pub mod http;
pub mod interfaces;
mod listener;
mod paths;
pub mod pm;
mod preconnection;
mod racing;
pub mod resolver;
mod scoring;
mod sctp_flow;
mod security;
mod transport;

pub use connection::{Connection, ConnectionInfo, Statistics};
pub use context::{Context, ContextBuilder};
pub use endpoint::RemoteEndpoint;
pub use error::{
    ConfigError, CongestionProblem, DtlsIdentityProblem, Error, EstablishError, FileProblem,
    InternalError, ListenFailure, MissingStack, NotSupported, SetupError, SocketOption, UsageError,
};
pub use listener::{Listener, ListenerOptions};
pub use paths::{Path, PathChange, PathChangeKind, PathChanges, PathState};
pub use preconnection::{CandidateListing, Preconnection};
pub use security::{SecurityInfo, SecurityParameters};
pub use taps_core;
pub use taps_core::properties::{Preference, Properties, Protocol, TransportProperties};
pub use taps_core::race::{RaceError, RaceReport};
pub use taps_core::{AttemptCause, DnsFailure, LayerError};
pub use transport::sctp::kernel_sctp_available;

/// What the fuzz targets drive, built only with `--cfg fuzzing` (scripts/fuzz.sh): the
/// decoders of outside input that are not API of their own.
#[cfg(fuzzing)]
pub mod fuzzing {
    pub use crate::framing::read_frame;
    pub use crate::resolver::service_record;
}
