//! The errors of the taps API, split the way quinn splits its own: what can go wrong
//! before any I/O ([`SetupError`]: configuration, properties, usage), what can go wrong
//! while establishing a connection ([`EstablishError`]: names, candidates, the race), and
//! what can go wrong on an established connection (I/O, message size). [`Error`] holds
//! any of them, so `?` works across the API. Every cause is data; text exists only as
//! `Display`, rendered when shown.

use std::fmt;
use std::sync::Arc;

use taps_core::candidates::{PrunedCandidate, Unsatisfiable};
use taps_core::properties::PropertyError;
use taps_core::race::{AttemptId, RaceError};
use taps_core::AttemptCause;
use taps_core::{DnsFailure, Family, Unavailable};

/// Everything that can go wrong, each with a message that says what and why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Before any I/O: bad configuration, properties or usage.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// Establishing a connection failed: the name, the candidates or the race.
    #[error(transparent)]
    Establish(#[from] EstablishError),
    /// A socket error after establishment.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A message over the size the connection can carry.
    #[error("message of {size} bytes exceeds the maximum of {max}")]
    MessageTooBig {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A broken invariant inside taps: a bug to report, not the network's doing nor the
    /// caller's.
    #[error("internal error (a bug in taps, please report it): {0}")]
    Internal(#[from] InternalError),
}

/// Which invariant of taps broke. Each variant names one; none is expected to happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InternalError {
    /// The race named an attempt the winner that the driver holds no connection for, or
    /// that the race's report does not show as won.
    #[error("the race named attempt {0} the winner, but no connection of it is at hand")]
    WinnerWithoutConnection(AttemptId),
}

/// An error found before any I/O: nothing was sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// Bad configuration (PIB directory, resolver settings, TLS, what a listener or the
    /// HTTP connector can do with the properties, ...).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Bad transport properties.
    #[error(transparent)]
    Properties(#[from] PropertyError),
    /// No stack satisfies the properties.
    #[error(transparent)]
    Unsatisfiable(#[from] Unsatisfiable),
    /// The call lacks what it needs, or the connection cannot do it.
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// A certificate, key or CA file of the security parameters is missing, unreadable
    /// or unusable.
    #[error("{}: {problem}", file.display())]
    SecurityFile {
        /// The file.
        file: std::path::PathBuf,
        /// What is wrong with it.
        problem: FileProblem,
    },
}

impl SetupError {
    /// A problem with a security file.
    pub(crate) fn security_file(file: &std::path::Path, problem: FileProblem) -> Self {
        SetupError::SecurityFile {
            file: file.to_path_buf(),
            problem,
        }
    }
}

/// Bad configuration, as data; the words are its `Display`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The resolver settings cannot work.
    #[error("resolver: {0}")]
    Resolver(#[from] crate::resolver::ResolverConfigError),
    /// A PIB file or directory could not be loaded.
    #[error("PIB: {0}")]
    Pib(#[from] taps_core::policy::PibError),
    /// rustls refused the TLS configuration.
    #[error("TLS: {0}")]
    Tls(rustls::Error),
    /// quinn refused the TLS configuration for QUIC.
    #[error("QUIC: {0}")]
    Quic(quinn::crypto::rustls::NoInitialCipherSuite),
    /// The server name to verify is neither a DNS name nor an IP address.
    #[error("server name {0:?} is neither a DNS name nor an IP address")]
    ServerName(String),
    /// A secure listener has no certificate and key.
    #[error("a secure listener needs a certificate and key (SecurityParameters::identity)")]
    NoIdentity,
    /// No allowed stack could listen.
    #[error("nothing to listen on: allowed stacks {}; {}", StackList(.allowed), MissingList(.missing))]
    NothingToListenOn {
        /// Every stack the properties allow, with why this build cannot run it (if so).
        allowed: Vec<(taps_core::Stack, Option<Unavailable>)>,
        /// The stacks that could not listen, and why.
        missing: Vec<MissingStack>,
    },
    /// Some allowed stack could not listen, and every one had to
    /// ([`ListenerOptions::every_stack`](crate::ListenerOptions)).
    #[error("not every allowed stack can listen: {}", MissingList(.0))]
    NotEveryStackListens(Vec<MissingStack>),
    /// The HTTP connector's properties allow a stack hyper cannot speak HTTP/1.1 or
    /// HTTP/2 over.
    #[error(
        "HTTP ({}) needs a byte stream over TCP or MPTCP{}, but the properties allow {stack} \
         (QUIC carries only HTTP/3; SCTP and UDP carry no HTTP hyper speaks)",
        if *.secure { "https" } else { "http" },
        if *.secure { " with TLS" } else { "" }
    )]
    HttpStack {
        /// `https` (TLS required) or `http`.
        secure: bool,
        /// The stack that does not fit.
        stack: taps_core::Stack,
    },
    /// The HTTP connector's properties leave no stack this host can run.
    #[error("HTTP ({}): the properties leave no stack this host can run", if *.0 { "https" } else { "http" })]
    HttpNoStack(bool),
    /// A URI whose scheme is not http or https.
    #[cfg(feature = "http")]
    #[error("{uri}: scheme {scheme} is not http or https", uri = .0, scheme = .0.scheme_str().unwrap_or("(none)"))]
    HttpScheme(http::Uri),
    /// A URI that names no host.
    #[cfg(feature = "http")]
    #[error("{0}: no host")]
    HttpNoHost(http::Uri),
}

/// A call that lacks what it needs, or a connection that cannot do what was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// `candidates` without a remote endpoint.
    #[error("candidates need a remote endpoint")]
    CandidatesWithoutRemote,
    /// `initiate` without a remote endpoint.
    #[error("initiate needs a remote endpoint")]
    InitiateWithoutRemote,
    /// `listen` without a local endpoint.
    #[error("listen needs a local endpoint (address or port)")]
    ListenWithoutLocal,
    /// `clone_flow` on a QUIC connection that is closing or grants no new stream.
    #[error("the QUIC connection is closing or grants no new stream")]
    QuicNoStream,
    /// `clone_flow` on an SCTP association that is shutting down.
    #[error("the SCTP association is shutting down")]
    SctpShuttingDown,
    /// `clone_flow` when every stream this side may open is in use.
    #[error("every SCTP stream this side may open on the association is in use")]
    SctpStreamsInUse,
    /// `set_primary_path` with an address that is not the peer's end of any of the
    /// connection's paths.
    #[error("{remote} is not the peer's address of any path of this {protocol} connection")]
    NotAPath {
        /// The address asked for.
        remote: std::net::SocketAddr,
        /// The connection's protocol.
        protocol: taps_core::properties::Protocol,
    },
    /// `add_local_address`/`remove_local_address` on a connection whose local addresses
    /// are fixed: anything but SCTP made with `multihoming` (or `multipath` active).
    #[error("this {protocol} connection's local addresses are fixed: only SCTP with the `multihoming` property (or `multipath` active) adds or removes a local address after connecting")]
    FixedLocalAddresses {
        /// The connection's protocol.
        protocol: taps_core::properties::Protocol,
    },
    /// `clone_flow` on a stack without streams.
    #[error("only SCTP and QUIC connections can be cloned (a new stream of the association or QUIC connection)")]
    NotCloneable,
}

/// What this host or build cannot do for an attempt: the typed reason inside
/// [`AttemptCause::Unsupported`] (read it back with `cause.find::<NotSupported>()` on the
/// cause's [`LayerError`](taps_core::LayerError)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotSupported {
    /// The kernel has no such protocol (MPTCP, UDP-Lite).
    #[error("{0} not available in this kernel")]
    Protocol(taps_core::properties::Protocol),
    /// The kernel refuses a socket option on this protocol's sockets.
    #[error("{option} is not supported on {protocol} sockets by this kernel")]
    SocketOption {
        /// The option.
        option: SocketOption,
        /// TCP or MPTCP.
        protocol: taps_core::properties::Protocol,
    },
    /// A TCP congestion control the kernel cannot use.
    #[error("TCP congestion control '{name}' {problem}")]
    Congestion {
        /// The name asked for.
        name: Arc<str>,
        /// Why the kernel cannot use it.
        problem: CongestionProblem,
    },
    /// A stack this build does not run at this layer.
    #[error("{0} is not run by this build (TLS over TCP and MPTCP, QUIC, and DTLS over UDP and UDP-Lite, are)")]
    Stack(taps_core::Stack),
    /// A QUIC attempt of a preconnection that set up no QUIC endpoint.
    #[error("QUIC is not set up for this preconnection")]
    QuicNotSetUp,
    /// The client identity cannot be used for DTLS.
    #[error("the client identity cannot be used for DTLS: {0}")]
    DtlsIdentity(DtlsIdentityProblem),
}

/// A socket option taps sets on stream sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketOption {
    /// `TCP_NODELAY`.
    NoDelay,
    /// `TCP_USER_TIMEOUT`.
    UserTimeout,
    /// `SO_KEEPALIVE` with `TCP_KEEPIDLE`.
    KeepAlive,
}

impl fmt::Display for SocketOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SocketOption::NoDelay => "TCP_NODELAY",
            SocketOption::UserTimeout => "TCP_USER_TIMEOUT",
            SocketOption::KeepAlive => "TCP keep-alive",
        })
    }
}

/// Why the kernel cannot use a TCP congestion control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CongestionProblem {
    /// Empty, too long or with a NUL: not a name the kernel could know.
    #[error("is not a valid name")]
    InvalidName,
    /// The kernel has no such algorithm (`ENOENT`).
    #[error("is not available in this kernel")]
    Missing,
    /// Not in `net.ipv4.tcp_allowed_congestion_control` for an unprivileged process
    /// (`EPERM`).
    #[error("is not permitted (see net.ipv4.tcp_allowed_congestion_control)")]
    NotPermitted,
}

/// What is wrong with a certificate, key or CA file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileProblem {
    /// It cannot be read.
    #[error("cannot read it: {0}")]
    Unreadable(std::io::Error),
    /// It holds nothing PEM-encoded.
    #[error("nothing PEM-encoded in it")]
    NoPem,
    /// Its PEM is malformed.
    #[error("not valid PEM: {}", PemWords(.0))]
    BadPem(rustls::pki_types::pem::Error),
    /// It holds no certificate.
    #[error("no certificate in it (expected PEM \"BEGIN CERTIFICATE\")")]
    NoCertificate,
    /// It holds no private key.
    #[error("no private key in it (expected PEM \"BEGIN PRIVATE KEY\")")]
    NoPrivateKey,
    /// The key does not belong to the certificate.
    #[error("does not fit the certificate in {}: {error}", cert.display())]
    KeyMismatch {
        /// The certificate file.
        cert: std::path::PathBuf,
        /// rustls' finding.
        error: rustls::Error,
    },
    /// A certificate in it cannot be a trust anchor.
    #[error("holds a certificate that is not a usable CA: {0}")]
    UnusableCa(rustls::Error),
}

/// A malformed PEM file in words: the variant's meaning, not its debug output.
struct PemWords<'a>(&'a rustls::pki_types::pem::Error);

impl fmt::Display for PemWords<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use rustls::pki_types::pem::Error;
        match self.0 {
            Error::MissingSectionEnd { end_marker } => write!(
                f,
                "a section has no end (expected \"{}\")",
                String::from_utf8_lossy(end_marker)
            ),
            Error::IllegalSectionStart { line } => write!(
                f,
                "a section starts badly: \"{}\"",
                String::from_utf8_lossy(line)
            ),
            Error::Base64Decode(why) => write!(f, "its base64 does not decode ({why})"),
            other => write!(f, "{other}"),
        }
    }
}

/// A stack the listener could not listen on, and why.
#[derive(Debug, Clone)]
pub struct MissingStack {
    /// The stack.
    pub stack: taps_core::Stack,
    /// The address it was to listen on.
    pub addr: std::net::SocketAddr,
    /// Why it could not.
    pub reason: ListenFailure,
}

/// Why one stack could not listen. Cloning shares the OS error.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ListenFailure {
    /// The operating system refused the socket, its bind or its listen.
    #[error("{0}")]
    Socket(Arc<std::io::Error>),
    /// SCTP's UDP encapsulation port is held by another socket.
    #[error(
        "UDP port {port} (SCTP's encapsulation port) is in use, most likely by another \
         process's SCTP listener (or by a listener of this process dropped a moment ago: \
         `Listener::close().await` waits for its sockets): usrsctp runs inside each process, \
         so only one process per host serves SCTP on one encapsulation port; give this \
         context another one (Context::builder().sctp_udp_port or `taps --sctp-udp-port`, \
         and the same on the clients) ({error})"
    )]
    SctpPortInUse {
        /// The encapsulation port.
        port: u16,
        /// The OS error.
        error: Arc<std::io::Error>,
    },
    /// SCTP over UDP could not listen for another reason.
    #[error("UDP port {port}: {error}")]
    Sctp {
        /// The encapsulation port.
        port: u16,
        /// The OS error.
        error: Arc<std::io::Error>,
    },
    /// The listener's certificate and key cannot serve DTLS.
    #[error("{}: {problem}", key_file.display())]
    DtlsIdentity {
        /// The key file of the identity.
        key_file: std::path::PathBuf,
        /// What DTLS cannot use.
        problem: DtlsIdentityProblem,
    },
}

impl ListenFailure {
    /// An OS error, shared.
    pub(crate) fn socket(e: std::io::Error) -> Self {
        ListenFailure::Socket(Arc::new(e))
    }

    /// Whether the address (not SCTP's encapsulation port) is taken: `EADDRINUSE`.
    pub(crate) fn address_in_use(&self) -> bool {
        matches!(self, ListenFailure::Socket(e) if e.kind() == std::io::ErrorKind::AddrInUse)
    }
}

/// Why a certificate and key cannot serve DTLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DtlsIdentityProblem {
    /// The chain holds no certificate.
    #[error("no certificate")]
    NoCertificate,
    /// The DTLS implementation signs with ECDSA P-256 or P-384 keys only, and this key
    /// is of another kind (RSA, Ed25519, ...).
    #[error("DTLS needs an ECDSA P-256 or P-384 key")]
    KeyType,
}

impl std::fmt::Display for MissingStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on {}: {}", self.stack, self.addr, self.reason)
    }
}

/// `a, b (why), c`, rendered when shown.
struct StackList<'a>(&'a [(taps_core::Stack, Option<Unavailable>)]);

impl fmt::Display for StackList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (stack, why)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            match why {
                Some(why) => write!(f, "{sep}{stack} ({why})")?,
                None => write!(f, "{sep}{stack}")?,
            }
        }
        Ok(())
    }
}

/// `stack on addr: reason; ...` or, with none, that no allowed stack listens here.
struct MissingList<'a>(&'a [MissingStack]);

impl fmt::Display for MissingList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none of them can listen in this build");
        }
        for (i, m) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{m}")?;
        }
        Ok(())
    }
}

/// Establishing a connection failed. Cloning copies the race's report.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EstablishError {
    /// The name did not resolve to any address: each family's cause.
    #[error("{host} does not resolve: {}", DnsCauses(causes))]
    Resolve {
        /// The name.
        host: String,
        /// Each family's failure.
        causes: Vec<(Family, DnsFailure)>,
    },
    /// Every candidate was ruled out for the resolved addresses: each one with why.
    #[error("no candidate left for {host}: {}", PrunedList(pruned))]
    NoCandidates {
        /// The name.
        host: String,
        /// The candidates ruled out, with their violations.
        pruned: Vec<PrunedCandidate>,
    },
    /// The race failed: every attempt with its typed cause.
    #[error(transparent)]
    Race(#[from] RaceError),
}

impl Error {
    /// A usage error (the call lacks what it needs).
    pub(crate) fn usage(what: UsageError) -> Error {
        Error::Setup(SetupError::Usage(what))
    }

    /// A configuration error.
    pub(crate) fn config(what: impl Into<ConfigError>) -> Error {
        Error::Setup(SetupError::Config(what.into()))
    }

    /// The failed race, if this is one.
    pub fn race(&self) -> Option<&RaceError> {
        match self {
            Error::Establish(EstablishError::Race(e)) => Some(e),
            _ => None,
        }
    }

    /// The typed cause of every failed attempt, if this is a failed race (empty
    /// otherwise). Cost: a scan of the race's report.
    pub fn attempt_causes(&self) -> Vec<AttemptCause> {
        self.race()
            .map(|r| r.attempts().map(|a| a.cause).collect())
            .unwrap_or_default()
    }
}

impl From<PropertyError> for Error {
    fn from(e: PropertyError) -> Self {
        Error::Setup(e.into())
    }
}

impl From<Unsatisfiable> for Error {
    fn from(e: Unsatisfiable) -> Self {
        Error::Setup(e.into())
    }
}

impl From<RaceError> for Error {
    fn from(e: RaceError) -> Self {
        Error::Establish(e.into())
    }
}

/// `A: cause; AAAA: cause`, rendered when shown.
struct DnsCauses<'a>(&'a [(Family, DnsFailure)]);

impl fmt::Display for DnsCauses<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (family, cause)) in self.0.iter().enumerate() {
            let rr = if *family == Family::V4 { "A" } else { "AAAA" };
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{rr}: {cause}")?;
        }
        Ok(())
    }
}

/// `<stack> <remote>: <violation>, ...; ...`, rendered when shown.
struct PrunedList<'a>(&'a [PrunedCandidate]);

impl fmt::Display for PrunedList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{} {}: ", p.stack, p.remote)?;
            for (j, v) in p.violations.iter().enumerate() {
                let sep = if j == 0 { "" } else { ", " };
                write!(f, "{sep}{v}")?;
            }
        }
        Ok(())
    }
}
