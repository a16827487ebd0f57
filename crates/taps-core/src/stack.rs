//! Protocol stacks and the services each one provides.
//!
//! This table is the semantics of the service properties: "reliable + message
//! boundaries" means SCTP because this table says SCTP is the only stack with both.

use std::fmt;

use crate::properties::{Name, Protocol};

/// The security layer of a stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Security {
    /// No security layer.
    None,
    /// TLS over a stream protocol.
    Tls,
    /// DTLS over a datagram protocol.
    Dtls,
    /// QUIC's built-in TLS 1.3.
    QuicTls,
}

/// A full protocol stack: transport plus security.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stack {
    /// Transport protocol.
    pub protocol: Protocol,
    /// Security layer.
    pub security: Security,
}

impl Stack {
    /// Every stack taps can rank, in tie-break order.
    pub const ALL: [Stack; 11] = [
        Stack::plain(Protocol::Tcp),
        Stack::plain(Protocol::Mptcp),
        Stack::plain(Protocol::Sctp),
        Stack::plain(Protocol::Udp),
        Stack::plain(Protocol::UdpLite),
        Stack::new(Protocol::Quic, Security::QuicTls),
        Stack::new(Protocol::Sctp, Security::Dtls),
        Stack::new(Protocol::Tcp, Security::Tls),
        Stack::new(Protocol::Mptcp, Security::Tls),
        Stack::new(Protocol::Udp, Security::Dtls),
        Stack::new(Protocol::UdpLite, Security::Dtls),
    ];

    /// A stack.
    pub const fn new(protocol: Protocol, security: Security) -> Stack {
        Stack { protocol, security }
    }

    /// A stack without security.
    pub const fn plain(protocol: Protocol) -> Stack {
        Stack::new(protocol, Security::None)
    }

    /// Position in [`Stack::ALL`] (used to break ties deterministically).
    pub fn index(self) -> usize {
        Stack::ALL
            .iter()
            .position(|s| *s == self)
            .unwrap_or(usize::MAX)
    }

    /// Whether the stack carries messages (datagrams) rather than a byte stream.
    pub fn is_datagram(self) -> bool {
        matches!(self.protocol, Protocol::Udp | Protocol::UdpLite)
    }

    /// Whether this stack provides service property `name` (for boolean service
    /// properties; other names give [`Provides::Configurable`]).
    pub fn provides(self, name: Name) -> Provides {
        use Protocol::*;
        use Provides::*;
        let p = self.protocol;
        match name {
            Name::Reliability => match p {
                Tcp | Mptcp | Quic => Always,
                Sctp => Always,
                Udp | UdpLite => Never,
            },
            Name::PreserveMsgBoundaries => match p {
                Sctp | Udp | UdpLite => Always,
                Tcp | Mptcp | Quic => Never,
            },
            Name::PerMsgReliability => match p {
                Sctp => Configurable, // PR-SCTP
                _ => Never,
            },
            Name::PreserveOrder => match p {
                Tcp | Mptcp | Quic => Always,
                Sctp => Configurable, // unordered delivery per message
                Udp | UdpLite => Never,
            },
            Name::ZeroRttMsg => match p {
                Quic | Udp | UdpLite => Always,
                _ => Never,
            },
            Name::Multistreaming => match p {
                Sctp | Quic => Always,
                _ => Never,
            },
            Name::FullChecksumSend | Name::FullChecksumRecv => match p {
                UdpLite => Configurable, // checksum coverage
                _ => Always,
            },
            Name::CongestionControl => match p {
                Udp | UdpLite => Never,
                _ => Always,
            },
            Name::KeepAlive => match p {
                Tcp | Mptcp | Sctp | Quic => Configurable,
                Udp | UdpLite => Never,
            },
            Name::Security => {
                if self.security == Security::None {
                    Never
                } else {
                    Always
                }
            }
            Name::SoftErrorNotify => match p {
                Udp | UdpLite => Configurable,
                _ => Never,
            },
            _ => Configurable,
        }
    }
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.security {
            Security::None => write!(f, "{}", self.protocol),
            Security::QuicTls => f.write_str("QUIC"),
            Security::Tls => write!(f, "TLS/{}", self.protocol),
            Security::Dtls => write!(f, "DTLS/{}", self.protocol),
        }
    }
}

/// Whether a stack provides a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provides {
    /// Always (cannot be turned off).
    Always,
    /// Never.
    Never,
    /// Can be turned on or off per connection.
    Configurable,
}

impl Provides {
    /// Whether a Require can be met.
    pub fn can(self) -> bool {
        self != Provides::Never
    }
    /// Whether a Prohibit can be met.
    pub fn can_avoid(self) -> bool {
        self != Provides::Always
    }
}
