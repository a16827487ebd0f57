//! The property names taps understands, with their RFC 9622 and NEAT spellings.

use std::fmt;

use super::value::Value;
use super::PropertyError;

/// What shape of value a property takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    /// A service a stack provides or not; value is a boolean, precedence gives the level.
    Service,
    /// A list of protocol names (NEAT `transport`).
    Protocols,
    /// 4 or 6.
    IpVersion,
    /// Interface names or kinds.
    Interface,
    /// Local addresses to bind (NEAT `local_ips`).
    LocalAddresses,
    /// A remote address fact, used in policy `match` clauses.
    RemoteAddress,
    /// Connection property: a word from a fixed set.
    Word(&'static [&'static str]),
    /// Connection property: a number.
    Number,
    /// Connection property: a boolean.
    Flag,
    /// Free text (NEAT's descriptive values).
    Text,
}

macro_rules! names {
    ($( $var:ident => $canon:literal [$($alias:literal),*] $kind:expr, $doc:literal; )*) => {
        /// A transport property name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Name { $( #[doc = $doc] $var, )* }

        impl Name {
            /// Every name, in a stable order.
            pub const ALL: &'static [Name] = &[$(Name::$var,)*];

            /// Canonical spelling (RFC 9622 camelCase where RFC 9622 has the property,
            /// else NEAT's).
            pub fn as_str(self) -> &'static str {
                match self { $( Name::$var => $canon, )* }
            }

            /// The shape of value it takes.
            pub fn kind(self) -> NameKind {
                match self { $( Name::$var => $kind, )* }
            }

            /// Looks a name up by any of its spellings (canonical, NEAT, snake_case),
            /// case-insensitively. Compares in place: no allocation.
            pub fn parse(s: &str) -> Option<Name> {
                $(
                    if same_name(s, $canon) { return Some(Name::$var); }
                    $( if same_name(s, $alias) { return Some(Name::$var); } )*
                )*
                None
            }
        }
    };
}

/// Whether `a` and `b` spell the same name: equal once ASCII case, `_` and `-` are
/// ignored (`preserveMsgBoundaries`, `preserve_msg_boundaries`, `PRESERVE-MSG-BOUNDARIES`).
fn same_name(a: &str, b: &str) -> bool {
    fn letters(s: &str) -> impl Iterator<Item = u8> + '_ {
        s.bytes()
            .filter(|c| *c != b'_' && *c != b'-')
            .map(|c| c.to_ascii_lowercase())
    }
    letters(a).eq(letters(b))
}

const MULTIPATH_WORDS: &[&str] = &["disabled", "active", "passive"];
const MULTIPATH_POLICY_WORDS: &[&str] = &["handover", "interactive", "aggregate"];
const DIRECTION_WORDS: &[&str] = &[
    "bidirectional",
    "unidirectional-send",
    "unidirectional-receive",
];
const SCHEDULER_WORDS: &[&str] = &[
    "fcfs",
    "round-robin",
    "round-robin-packet",
    "priority",
    "fair-bandwidth",
    "weighted-fair-queueing",
];
const TRANSPORT_TYPE_WORDS: &[&str] = &["message", "stream", "datagram"];

names! {
    Reliability => "reliability" ["reliable", "reliable_transport"] NameKind::Service, "Reliable data transfer.";
    PreserveMsgBoundaries => "preserveMsgBoundaries" ["message_boundaries"] NameKind::Service, "Message boundaries preserved.";
    PerMsgReliability => "perMsgReliability" ["partial_reliability"] NameKind::Service, "Reliability configurable per message.";
    PreserveOrder => "preserveOrder" ["ordered"] NameKind::Service, "In-order delivery.";
    ZeroRttMsg => "zeroRttMsg" ["zero_rtt"] NameKind::Service, "Data in the first flight (0-RTT).";
    Multistreaming => "multistreaming" ["multistream"] NameKind::Service, "Several streams in one association.";
    FullChecksumSend => "fullChecksumSend" [] NameKind::Service, "Full checksum coverage when sending.";
    FullChecksumRecv => "fullChecksumRecv" [] NameKind::Service, "Full checksum coverage when receiving.";
    CongestionControl => "congestionControl" [] NameKind::Service, "Congestion control.";
    KeepAlive => "keepAlive" [] NameKind::Service, "Keep-alive packets.";
    UseTemporaryLocalAddress => "useTemporaryLocalAddress" [] NameKind::Service, "RFC 8981 temporary local addresses.";
    AdvertisesAltaddr => "advertisesAltaddr" [] NameKind::Flag, "Advertise alternate addresses to the peer.";
    SoftErrorNotify => "softErrorNotify" [] NameKind::Service, "Soft errors (ICMP) reported.";
    ActiveReadBeforeSend => "activeReadBeforeSend" [] NameKind::Service, "Receive before sending.";
    Security => "security" ["secure"] NameKind::Service, "Encryption and authentication (TLS, DTLS or QUIC).";
    Verification => "verification" ["verify"] NameKind::Flag, "Verify the peer's certificate (on unless turned off).";
    Multipath => "multipath" [] NameKind::Word(MULTIPATH_WORDS), "Multipath mode.";
    MultipathPolicy => "multipathPolicy" ["multipath_policy"] NameKind::Word(MULTIPATH_POLICY_WORDS), "Multipath policy (RFC 9622 6.2.15): handover, interactive or aggregate; Linux applies it per network namespace (path manager endpoints).";
    Multihoming => "multihoming" [] NameKind::Flag, "NEAT: use several local addresses (multipath active).";
    Direction => "direction" [] NameKind::Word(DIRECTION_WORDS), "Communication direction.";
    Transport => "transport" ["protocols"] NameKind::Protocols, "NEAT: which transport protocols.";
    TransportType => "transport_type" [] NameKind::Word(TRANSPORT_TYPE_WORDS), "NEAT: message or stream service.";
    IpVersion => "ip_version" ["family", "address_family"] NameKind::IpVersion, "IPv4 or IPv6.";
    Interface => "interface" ["interfaces"] NameKind::Interface, "Local interface by name or kind.";
    Pvd => "pvd" [] NameKind::Text, "Provisioning domain (accepted, not yet used).";
    LocalIps => "local_ips" ["local_addresses"] NameKind::LocalAddresses, "NEAT: local addresses to bind.";
    RemoteIp => "remote_ip" ["remote_address"] NameKind::RemoteAddress, "Remote address (a candidate fact for policies).";
    DomainName => "domain_name" ["remote_host"] NameKind::Text, "Remote host name (a fact for policies).";
    Port => "port" ["remote_port"] NameKind::Number, "Remote port (a fact for policies).";
    CapacityProfile => "connCapacityProfile" ["capacity_profile"] NameKind::Text, "Capacity profile (maps to DSCP).";
    LowLatency => "low_latency" [] NameKind::Flag, "NEAT: low latency wanted (capacity profile interactive).";
    DscpValue => "dscp_value" ["dscp"] NameKind::Number, "NEAT: explicit DSCP value.";
    ConnPriority => "connPriority" ["flow_priority", "priority"] NameKind::Number, "Connection priority.";
    ConnTimeout => "connTimeout" ["abort_timeout"] NameKind::Number, "Timeout for aborting the connection in seconds (RFC 9622 8.1.3): how long sent data may go unacknowledged (TCP user timeout, SCTP retransmission limit, QUIC idle timeout).";
    EstablishmentTimeout => "establishmentTimeout" ["timeout", "initiate_timeout"] NameKind::Number, "Establishment timeout in seconds (RFC 9622 Initiate's timeout).";
    KeepAliveTimeout => "keepAliveTimeout" ["keepalive_interval"] NameKind::Number, "Keep-alive interval in seconds (RFC 9622 8.1.4): TCP keep-alive idle time, SCTP heartbeat interval.";
    ConnScheduler => "connScheduler" ["scheduler"] NameKind::Word(SCHEDULER_WORDS), "Stream scheduler (RFC 8260).";
    HeDelay => "__he_delay" ["attempt_delay", "connection_attempt_delay"] NameKind::Number, "Stagger between attempts in ms.";
    FlowGroup => "flow_group" ["conn_group"] NameKind::Number, "NEAT: flow group.";
    StreamCount => "stream_count" [] NameKind::Number, "NEAT: number of SCTP streams.";
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Name {
    /// Checks that `value` has the shape this property takes.
    pub fn validate(self, value: &Value) -> Result<(), PropertyError> {
        let bad = |reason: String| {
            Err(PropertyError::Invalid {
                name: self.as_str().into(),
                reason,
            })
        };
        let inner = match value {
            Value::Not(v) => v.as_ref(),
            v => v,
        };
        let leaves: Vec<&Value> = match inner {
            Value::List(items) => items.iter().collect(),
            v => vec![v],
        };
        match self.kind() {
            NameKind::Service | NameKind::Flag => match value {
                Value::Bool(_) | Value::Any => Ok(()),
                v => bad(format!("expected true or false, got {v}")),
            },
            NameKind::Protocols => {
                for leaf in leaves {
                    match leaf.as_str() {
                        Some(s) if super::Protocol::parse(s).is_some() => {}
                        Some("reliable" | "unreliable") => {}
                        Some(s) if ["TLS", "DTLS", "HTTPS", "SSL"].iter().any(|t| s.eq_ignore_ascii_case(t)) => {
                            return bad(format!(
                                "{leaf} is security, not a transport protocol: ask for it with {{\"security\": \"require\"}} (TLS over TCP, DTLS over UDP, QUIC)"
                            ))
                        }
                        _ => return bad(format!(
                            "unknown transport protocol {leaf} (known: TCP, MPTCP, SCTP, SCTP/UDP, QUIC, UDP, UDP-Lite)"
                        )),
                    }
                }
                Ok(())
            }
            NameKind::IpVersion => {
                for leaf in leaves {
                    match leaf.as_f64() {
                        Some(v) if v == 4.0 || v == 6.0 => {}
                        _ => return bad(format!("expected 4 or 6, got {leaf}")),
                    }
                }
                Ok(())
            }
            NameKind::Interface | NameKind::Text => {
                for leaf in leaves {
                    if leaf.as_str().is_none() && !matches!(leaf, Value::Any) {
                        return bad(format!("expected text, got {leaf}"));
                    }
                }
                Ok(())
            }
            NameKind::LocalAddresses | NameKind::RemoteAddress => {
                for leaf in leaves {
                    match leaf.as_str() {
                        Some(s) if s.parse::<std::net::IpAddr>().is_ok() => {}
                        _ => return bad(format!("expected an IP address, got {leaf}")),
                    }
                }
                Ok(())
            }
            NameKind::Word(words) => {
                for leaf in leaves {
                    match leaf.as_str() {
                        Some(s) if words.contains(&s) => {}
                        _ => {
                            return bad(format!("expected one of {}, got {leaf}", words.join(", ")))
                        }
                    }
                }
                Ok(())
            }
            NameKind::Number => match value {
                Value::Int(_) | Value::Float(_) | Value::Range(..) | Value::Any => Ok(()),
                v => bad(format!("expected a number, got {v}")),
            },
        }
    }
}
