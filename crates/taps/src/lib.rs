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

pub mod connection;
pub mod context;
pub mod error;
pub mod interfaces;
pub mod listener;
pub mod preconnection;
mod racing;
pub mod resolver;
mod sctp_flow;
pub mod transport;

pub use connection::{Connection, ConnectionInfo, Statistics};
pub use context::{Context, ContextBuilder};
pub use error::Error;
pub use listener::Listener;
pub use preconnection::{Preconnection, RemoteEndpoint};
pub use taps_core;
pub use taps_core::properties::{Preference, Properties, Protocol, TransportProperties};
