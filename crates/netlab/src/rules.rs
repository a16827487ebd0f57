//! Rules the bridge applies, and the pure scheduling logic behind them (`Shaper`).
//!
//! A rule matches packets by their **server-side** endpoint: for a packet from the client
//! to the server that is its destination address and port, for a reply it is the source.
//! So one rule for `192.0.2.11` with a 25 ms delay delays both directions and gives a
//! 50 ms round trip to that address. Rules are tried in order; the first match applies;
//! a packet no rule matches passes unchanged.

#![forbid(unsafe_code)]

use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::packet::{PacketInfo, Proto};

/// Which way a packet travels through the bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client namespace to the server namespace.
    ToServer,
    /// From the server namespace to the client namespace.
    ToClient,
}

impl Direction {
    /// Index 0 for [`Direction::ToServer`], 1 for [`Direction::ToClient`].
    pub(crate) fn index(self) -> usize {
        match self {
            Direction::ToServer => 0,
            Direction::ToClient => 1,
        }
    }
}

/// Which packets a rule applies to. Every field set must match; the defaults match all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Match {
    /// Server-side address and prefix length (`/32` or `/128` for one address).
    pub net: Option<(IpAddr, u8)>,
    /// Transport protocol.
    pub proto: Option<Proto>,
    /// Server-side port (packets without ports never match a rule with a port).
    pub port: Option<u16>,
    /// Only this direction (both when `None`).
    pub direction: Option<Direction>,
}

impl Match {
    /// Matches every packet.
    pub fn any() -> Match {
        Match::default()
    }

    /// Matches packets to and from one server-side address.
    pub fn host(addr: IpAddr) -> Match {
        let len = if addr.is_ipv4() { 32 } else { 128 };
        Match {
            net: Some((addr, len)),
            ..Match::default()
        }
    }

    /// Matches packets to and from server-side addresses within `addr/len`.
    pub fn net(addr: IpAddr, len: u8) -> Match {
        Match {
            net: Some((addr, len)),
            ..Match::default()
        }
    }

    /// Restricts to one protocol.
    pub fn proto(mut self, proto: Proto) -> Match {
        self.proto = Some(proto);
        self
    }

    /// Restricts to TCP.
    pub fn tcp(self) -> Match {
        self.proto(Proto::Tcp)
    }

    /// Restricts to UDP.
    pub fn udp(self) -> Match {
        self.proto(Proto::Udp)
    }

    /// Restricts to one server-side port.
    pub fn port(mut self, port: u16) -> Match {
        self.port = Some(port);
        self
    }

    /// Restricts to one direction.
    pub fn direction(mut self, direction: Direction) -> Match {
        self.direction = Some(direction);
        self
    }

    /// Whether `pkt`, travelling `dir`, matches.
    pub(crate) fn matches(&self, pkt: &PacketInfo, dir: Direction) -> bool {
        let (addr, port) = match dir {
            Direction::ToServer => (pkt.dst, pkt.dst_port),
            Direction::ToClient => (pkt.src, pkt.src_port),
        };
        if self.direction.is_some_and(|d| d != dir) {
            return false;
        }
        if self.proto.is_some_and(|p| p != pkt.proto) {
            return false;
        }
        if self.port.is_some() && self.port != port {
            return false;
        }
        match self.net {
            Some((net, len)) => in_prefix(addr, net, len),
            None => true,
        }
    }
}

/// Whether `addr` lies in `net/len` (never across families).
pub(crate) fn in_prefix(addr: IpAddr, net: IpAddr, len: u8) -> bool {
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let len = u32::from(len.min(32));
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let len = u32::from(len.min(128));
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// How much longer a reordered packet is held unless the rule says (`reorder_by`).
pub const DEFAULT_REORDER_BY: Duration = Duration::from_millis(10);

/// What happens to the packets a rule matches, in each direction it matches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Effect {
    /// One-way delay (apply the rule in both directions for a round trip of twice this).
    pub delay: Duration,
    /// Up to this much is added to or taken from the delay, uniformly at random. Packets
    /// of one rule and direction keep their order (a later packet never overtakes).
    pub jitter: Duration,
    /// Probability of dropping each packet, 0.0..=1.0 (seeded, so runs repeat).
    pub loss: f64,
    /// Rate limit in bits per second (a token bucket with a one-packet burst): packets
    /// queue behind each other; `None` for unlimited.
    pub rate_bps: Option<u64>,
    /// When queueing for the rate limit would exceed this, the packet is dropped (unless
    /// [`Effect::queue_packets`] bounds the queue instead).
    pub queue_limit: Duration,
    /// When this many packets already wait for the rate limit (or are being sent), the
    /// packet is dropped: a router queue of that many packets, however long they take to
    /// send. `None`: [`Effect::queue_limit`] bounds the queue.
    pub queue_packets: Option<u32>,
    /// Drop every packet silently (no ICMP, no RST): a dead path.
    pub blackhole: bool,
    /// Probability of holding a packet back by [`Effect::reorder_by`] beyond its release
    /// time, 0.0..=1.0 (seeded): the packets after it overtake it, so it arrives out of
    /// order.
    pub reorder: f64,
    /// How much longer a reordered packet is held.
    pub reorder_by: Duration,
    /// Probability of sending a packet twice, 0.0..=1.0 (seeded); the copy leaves right
    /// after the original.
    pub duplicate: f64,
}

impl Default for Effect {
    fn default() -> Self {
        Effect {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            rate_bps: None,
            queue_limit: Duration::from_millis(500),
            queue_packets: None,
            blackhole: false,
            reorder: 0.0,
            reorder_by: DEFAULT_REORDER_BY,
            duplicate: 0.0,
        }
    }
}

/// One rule: which packets, and what happens to them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// Which packets.
    pub matcher: Match,
    /// What happens to them.
    pub effect: Effect,
}

impl Rule {
    /// A rule that passes the matched packets unchanged until effects are added.
    pub fn new(matcher: Match) -> Rule {
        Rule {
            matcher,
            effect: Effect::default(),
        }
    }

    /// Sets the one-way delay.
    pub fn delay(mut self, delay: Duration) -> Rule {
        self.effect.delay = delay;
        self
    }

    /// Sets the one-way delay to half of `rtt` (the rule must match both directions).
    pub fn rtt(self, rtt: Duration) -> Rule {
        self.delay(rtt / 2)
    }

    /// Sets the jitter.
    pub fn jitter(mut self, jitter: Duration) -> Rule {
        self.effect.jitter = jitter;
        self
    }

    /// Sets the loss probability (clamped to 0.0..=1.0).
    pub fn loss(mut self, loss: f64) -> Rule {
        self.effect.loss = loss.clamp(0.0, 1.0);
        self
    }

    /// Sets a rate limit in bits per second.
    pub fn rate(mut self, bits_per_second: u64) -> Rule {
        self.effect.rate_bps = Some(bits_per_second.max(1));
        self
    }

    /// Bounds the rate limiter's queue to `packets` packets (tail drop).
    pub fn queue_packets(mut self, packets: u32) -> Rule {
        self.effect.queue_packets = Some(packets.max(1));
        self
    }

    /// Drops every matched packet silently.
    pub fn blackhole(mut self) -> Rule {
        self.effect.blackhole = true;
        self
    }

    /// Holds a fraction `p` (clamped to 0.0..=1.0) of the packets back by `by`, so the
    /// packets after them overtake them.
    pub fn reorder(mut self, p: f64, by: Duration) -> Rule {
        self.effect.reorder = p.clamp(0.0, 1.0);
        self.effect.reorder_by = by;
        self
    }

    /// Sends a fraction `p` (clamped to 0.0..=1.0) of the packets twice.
    pub fn duplicate(mut self, p: f64) -> Rule {
        self.effect.duplicate = p.clamp(0.0, 1.0);
        self
    }
}

/// What the shaper decided for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Forward it at this instant.
    Release(Instant),
    /// Forward it at the first instant and a copy of it at the second.
    Duplicate(Instant, Instant),
    /// Dropped by a blackhole rule.
    Blackholed,
    /// Dropped by random loss.
    Lost,
    /// Dropped because the rate-limit queue was full.
    QueueFull,
}

/// A small, fast, seeded pseudo-random generator (SplitMix64): losses and jitter repeat
/// from run to run with the same seed.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Per-rule scheduling state of one direction.
#[derive(Debug, Clone, Default)]
struct Lane {
    /// When the rate-limited link is free again.
    link_free: Option<Instant>,
    /// When each packet in the rate limiter's queue is sent, oldest first (kept only
    /// with a queue bound in packets).
    departures: std::collections::VecDeque<Instant>,
    /// The last release time handed out (keeps jittered packets in order).
    last_release: Option<Instant>,
}

/// The scheduling logic of one direction of the bridge, without I/O: given a packet and
/// the current time, decides whether and when it leaves. Deterministic for a seed.
#[derive(Debug, Clone)]
pub(crate) struct Shaper {
    dir: Direction,
    rules: Vec<Rule>,
    lanes: Vec<Lane>,
    default_lane: Lane,
    rng: Rng,
    /// Packets held back for reordering so far.
    pub(crate) reordered: u64,
}

impl Shaper {
    /// A shaper for `dir` with `rules` (first match wins) and a seed.
    pub(crate) fn new(dir: Direction, rules: Vec<Rule>, seed: u64) -> Shaper {
        let lanes = vec![Lane::default(); rules.len()];
        Shaper {
            dir,
            rules,
            lanes,
            default_lane: Lane::default(),
            reordered: 0,
            rng: Rng::new(seed ^ (dir.index() as u64 + 1).wrapping_mul(0x5851_f42d_4c95_7f2d)),
        }
    }

    /// Replaces the rules, resetting per-rule queues (the random sequence continues).
    pub(crate) fn set_rules(&mut self, rules: Vec<Rule>) {
        self.lanes = vec![Lane::default(); rules.len()];
        self.rules = rules;
    }

    /// The index of the first rule matching `pkt`, if any.
    pub(crate) fn rule_for(&self, pkt: &PacketInfo) -> Option<usize> {
        self.rules
            .iter()
            .position(|r| r.matcher.matches(pkt, self.dir))
    }

    /// Decides the fate of a packet of `len` bytes (`pkt` is `None` when it could not be
    /// parsed: such packets pass unchanged) arriving at `now`.
    pub(crate) fn decide(&mut self, pkt: Option<&PacketInfo>, len: usize, now: Instant) -> Verdict {
        let idx = pkt.and_then(|p| self.rule_for(p));
        let (effect, lane) = match idx {
            Some(i) => (self.rules[i].effect, &mut self.lanes[i]),
            None => (Effect::default(), &mut self.default_lane),
        };
        if effect.blackhole {
            return Verdict::Blackholed;
        }
        if effect.loss > 0.0 && self.rng.next_f64() < effect.loss {
            return Verdict::Lost;
        }
        let mut sent = now;
        if let Some(bps) = effect.rate_bps {
            let start = lane.link_free.map_or(now, |free| free.max(now));
            if effect.queue_packets.is_none() && start - now > effect.queue_limit {
                return Verdict::QueueFull;
            }
            if let Some(max) = effect.queue_packets {
                while lane.departures.front().is_some_and(|d| *d <= now) {
                    lane.departures.pop_front();
                }
                if lane.departures.len() >= max as usize {
                    return Verdict::QueueFull;
                }
            }
            let tx = Duration::from_nanos((len as u64 * 8).saturating_mul(1_000_000_000) / bps);
            sent = start + tx;
            lane.link_free = Some(sent);
            if effect.queue_packets.is_some() {
                lane.departures.push_back(sent);
            }
        }
        let mut delay = effect.delay;
        if !effect.jitter.is_zero() {
            let j = effect.jitter.as_secs_f64();
            let offset = (self.rng.next_f64() * 2.0 - 1.0) * j;
            delay = Duration::from_secs_f64((delay.as_secs_f64() + offset).max(0.0));
        }
        let mut release = sent + delay;
        if let Some(last) = lane.last_release {
            release = release.max(last);
        }
        // A reordered packet leaves later without holding back the lane: the packets
        // after it keep their times and overtake it.
        if effect.reorder > 0.0 && self.rng.next_f64() < effect.reorder {
            release += effect.reorder_by;
            self.reordered += 1;
        } else {
            lane.last_release = Some(release);
        }
        if effect.duplicate > 0.0 && self.rng.next_f64() < effect.duplicate {
            return Verdict::Duplicate(release, release);
        }
        Verdict::Release(release)
    }
}

/// Parses a duration like `25ms`, `1.5s`, `300us` or a bare number of milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        (s, 1e-3)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad duration {s:?} (e.g. 25ms, 1.5s)"))?;
    Duration::try_from_secs_f64(v * scale).map_err(|_| format!("bad duration {s:?}"))
}

/// Parses a share like `2%` or `0.02` (for `key`); it must lie in 0..=1.
fn parse_share(key: &str, v: &str) -> Result<f64, String> {
    let p: f64 = match v.strip_suffix('%') {
        Some(pct) => pct.parse::<f64>().map(|p| p / 100.0),
        None => v.parse(),
    }
    .map_err(|_| format!("bad {key} {v:?} (2% or 0.02)"))?;
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{key} {v:?} is not between 0% and 100%"))
    }
}

fn parse_rate(s: &str) -> Result<u64, String> {
    let lower = s.trim().to_ascii_lowercase();
    let (num, scale) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(suffix, scale)| lower.strip_suffix(suffix).map(|n| (n.to_string(), *scale)))
        .unwrap_or((lower.clone(), 1.0));
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad rate {s:?} (e.g. 8mbit, 500kbit)"))?;
    Ok((v * scale) as u64)
}

impl std::str::FromStr for Rule {
    type Err = String;

    /// Parses `key=value` pairs separated by commas, e.g.
    /// `host=192.0.2.11,tcp,port=80,rtt=50ms,jitter=2ms,loss=2%,rate=8mbit` or
    /// `net=2001:db8:5::/48,blackhole`. Keys: `host`, `net`, `proto` (`tcp`, `udp`,
    /// `sctp`, `icmp` or a number; `tcp`/`udp` alone work too), `port`, `dir`
    /// (`to-server`, `to-client`), `delay` (one way), `rtt`, `jitter`, `loss` (`2%` or
    /// `0.02`), `rate`, `queue` (rate-limit queue bound: `100ms`, or `50pkt` packets), `blackhole`, `reorder` (a
    /// share, like `loss`), `reorder-by` (how much later, default 10 ms), `dup` (a share
    /// sent twice).
    fn from_str(spec: &str) -> Result<Rule, String> {
        let mut rule = Rule::new(Match::any());
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').unwrap_or((part, ""));
            let need = || {
                if value.is_empty() {
                    Err(format!("{key} needs a value ({key}=...)"))
                } else {
                    Ok(value)
                }
            };
            match key {
                "host" => {
                    let ip: IpAddr = need()?
                        .parse()
                        .map_err(|_| format!("bad address {value:?}"))?;
                    rule.matcher.net = Match::host(ip).net;
                }
                "net" => {
                    let (a, l) = need()?
                        .split_once('/')
                        .ok_or_else(|| format!("net needs ADDR/LEN, got {value:?}"))?;
                    let ip: IpAddr = a.parse().map_err(|_| format!("bad address {a:?}"))?;
                    let len: u8 = l.parse().map_err(|_| format!("bad prefix length {l:?}"))?;
                    rule.matcher.net = Some((ip, len));
                }
                "tcp" => rule.matcher.proto = Some(Proto::Tcp),
                "udp" => rule.matcher.proto = Some(Proto::Udp),
                "proto" => {
                    rule.matcher.proto = Some(match need()? {
                        "tcp" => Proto::Tcp,
                        "udp" => Proto::Udp,
                        "sctp" => Proto::Sctp,
                        "udplite" => Proto::UdpLite,
                        "icmp" => Proto::Icmp,
                        n => Proto::from_number(
                            n.parse().map_err(|_| format!("bad protocol {n:?}"))?,
                        ),
                    })
                }
                "port" => {
                    rule.matcher.port =
                        Some(need()?.parse().map_err(|_| format!("bad port {value:?}"))?)
                }
                "dir" => {
                    rule.matcher.direction = Some(match need()? {
                        "to-server" | "out" => Direction::ToServer,
                        "to-client" | "in" => Direction::ToClient,
                        d => return Err(format!("bad direction {d:?} (to-server, to-client)")),
                    })
                }
                "delay" => rule.effect.delay = parse_duration(need()?)?,
                "rtt" => rule.effect.delay = parse_duration(need()?)? / 2,
                "jitter" => rule.effect.jitter = parse_duration(need()?)?,
                "queue" => match need()?.strip_suffix("pkt") {
                    Some(n) => {
                        rule = rule.queue_packets(
                            n.trim()
                                .parse()
                                .map_err(|_| format!("bad queue {n:?} (e.g. 50pkt or 100ms)"))?,
                        )
                    }
                    None => rule.effect.queue_limit = parse_duration(value)?,
                },
                "loss" => rule = rule.loss(parse_share(key, need()?)?),
                "reorder" => {
                    rule = rule.reorder(parse_share(key, need()?)?, rule.effect.reorder_by)
                }
                "reorder-by" | "reorder_by" => rule.effect.reorder_by = parse_duration(need()?)?,
                "dup" | "duplicate" => rule = rule.duplicate(parse_share(key, need()?)?),
                "rate" => rule = rule.rate(parse_rate(need()?)?),
                "blackhole" => rule.effect.blackhole = true,
                k => return Err(format!("unknown rule key {k:?}")),
            }
        }
        Ok(rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{self, tests::v4};

    fn info(dst: [u8; 4], dport: u16) -> PacketInfo {
        packet::parse(&v4([198, 51, 100, 2], dst, 6, 40000, dport)).unwrap()
    }

    fn reply(src: [u8; 4], sport: u16) -> PacketInfo {
        packet::parse(&v4(src, [198, 51, 100, 2], 6, sport, 40000)).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn matches_by_server_side_endpoint_in_both_directions() {
        let m = Match::host(ip("192.0.2.11")).tcp().port(80);
        assert!(m.matches(&info([192, 0, 2, 11], 80), Direction::ToServer));
        assert!(m.matches(&reply([192, 0, 2, 11], 80), Direction::ToClient));
        assert!(!m.matches(&info([192, 0, 2, 12], 80), Direction::ToServer));
        assert!(!m.matches(&info([192, 0, 2, 11], 81), Direction::ToServer));
        assert!(!m
            .udp()
            .matches(&info([192, 0, 2, 11], 80), Direction::ToServer));
        let only_out = Match::host(ip("192.0.2.11")).direction(Direction::ToServer);
        assert!(!only_out.matches(&reply([192, 0, 2, 11], 80), Direction::ToClient));
    }

    #[test]
    fn rule_specs_parse() {
        let r: Rule = "host=192.0.2.11,tcp,port=80,rtt=50ms,jitter=2ms,loss=2%,rate=8mbit"
            .parse()
            .unwrap();
        assert_eq!(r.matcher, Match::host(ip("192.0.2.11")).tcp().port(80));
        assert_eq!(r.effect.delay, Duration::from_millis(25));
        assert_eq!(r.effect.jitter, Duration::from_millis(2));
        assert!((r.effect.loss - 0.02).abs() < 1e-9);
        assert_eq!(r.effect.rate_bps, Some(8_000_000));
        let b: Rule = "net=2001:db8:5::/48,dir=to-server,blackhole"
            .parse()
            .unwrap();
        assert_eq!(b.matcher.net, Some((ip("2001:db8:5::"), 48)));
        assert_eq!(b.matcher.direction, Some(Direction::ToServer));
        assert!(b.effect.blackhole);
        assert!("host=nope".parse::<Rule>().is_err());
        assert!("frobnicate=1".parse::<Rule>().is_err());
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("300").unwrap(), Duration::from_millis(300));
    }

    #[test]
    fn prefixes() {
        assert!(in_prefix(ip("192.0.2.200"), ip("192.0.2.0"), 24));
        assert!(!in_prefix(ip("192.0.3.1"), ip("192.0.2.0"), 24));
        assert!(in_prefix(ip("2001:db8:5:2::1"), ip("2001:db8:5::"), 48));
        assert!(!in_prefix(ip("2001:db8:6::1"), ip("2001:db8:5::"), 48));
        assert!(in_prefix(ip("1.2.3.4"), ip("0.0.0.0"), 0));
        assert!(!in_prefix(ip("1.2.3.4"), ip("::"), 0));
    }

    #[test]
    fn delay_blackhole_and_first_match() {
        let rules = vec![
            Rule::new(Match::host(ip("192.0.2.21"))).blackhole(),
            Rule::new(Match::net(ip("192.0.2.0"), 24)).delay(Duration::from_millis(25)),
        ];
        let mut s = Shaper::new(Direction::ToServer, rules, 1);
        let now = Instant::now();
        assert_eq!(
            s.decide(Some(&info([192, 0, 2, 11], 80)), 60, now),
            Verdict::Release(now + Duration::from_millis(25))
        );
        assert_eq!(
            s.decide(Some(&info([192, 0, 2, 21], 80)), 60, now),
            Verdict::Blackholed
        );
        // No rule: unchanged; unparsable: unchanged.
        assert_eq!(
            s.decide(Some(&info([203, 0, 113, 1], 80)), 60, now),
            Verdict::Release(now)
        );
        assert_eq!(s.decide(None, 60, now), Verdict::Release(now));
    }

    #[test]
    fn loss_rate_is_close_to_configured_and_repeatable() {
        let rules = vec![Rule::new(Match::any()).loss(0.02)];
        let count = |seed| {
            let mut s = Shaper::new(Direction::ToServer, rules.clone(), seed);
            let now = Instant::now();
            (0..100_000)
                .filter(|_| s.decide(Some(&info([192, 0, 2, 11], 80)), 60, now) == Verdict::Lost)
                .count()
        };
        let lost = count(7);
        assert!((1700..2300).contains(&lost), "lost {lost} of 100000");
        assert_eq!(lost, count(7), "same seed, same losses");
    }

    #[test]
    fn jitter_stays_in_bounds_and_keeps_order() {
        let rules = vec![Rule::new(Match::any())
            .delay(Duration::from_millis(20))
            .jitter(Duration::from_millis(5))];
        let mut s = Shaper::new(Direction::ToClient, rules, 3);
        let t0 = Instant::now();
        let mut last = t0;
        let mut spread = (Duration::MAX, Duration::ZERO);
        for i in 0..1000u64 {
            let now = t0 + Duration::from_micros(i * 500);
            let Verdict::Release(at) = s.decide(Some(&reply([192, 0, 2, 11], 80)), 60, now) else {
                panic!("no loss configured");
            };
            assert!(at >= last, "reordered");
            last = at;
            let d = at - now;
            assert!(d <= Duration::from_millis(25), "{d:?}");
            spread = (spread.0.min(d), spread.1.max(d));
        }
        assert!(spread.1 - spread.0 > Duration::from_millis(5), "{spread:?}");
    }

    #[test]
    fn reorder_lets_later_packets_overtake_and_dup_sends_twice() {
        let by = Duration::from_millis(10);
        let rules = vec![Rule::new(Match::any())
            .delay(Duration::from_millis(5))
            .reorder(0.05, by)
            .duplicate(0.02)];
        let mut s = Shaper::new(Direction::ToServer, rules, 9);
        let t0 = Instant::now();
        let (mut releases, mut dups, mut held) = (Vec::new(), 0, 0);
        for i in 0..10_000u64 {
            let now = t0 + Duration::from_micros(i * 100);
            let at = match s.decide(Some(&info([192, 0, 2, 11], 80)), 60, now) {
                Verdict::Release(at) => at,
                Verdict::Duplicate(at, copy) => {
                    assert_eq!(at, copy);
                    dups += 1;
                    at
                }
                v => panic!("{v:?}"),
            };
            let d = at - now;
            if d == Duration::from_millis(15) {
                held += 1;
            } else {
                assert_eq!(d, Duration::from_millis(5), "unheld packets keep the delay");
            }
            releases.push(at);
        }
        assert!((400..600).contains(&held), "held back {held} of 10000");
        assert!((140..260).contains(&dups), "duplicated {dups} of 10000");
        let overtaken = releases.windows(2).filter(|w| w[1] < w[0]).count();
        assert!(
            overtaken >= held * 9 / 10,
            "{overtaken} overtaken, {held} held"
        );
        let r: Rule = "net=192.0.2.0/24,reorder=5%,reorder-by=20ms,dup=2%"
            .parse()
            .unwrap();
        assert!((r.effect.reorder - 0.05).abs() < 1e-9);
        assert_eq!(r.effect.reorder_by, Duration::from_millis(20));
        assert!((r.effect.duplicate - 0.02).abs() < 1e-9);
        assert!("reorder=150%".parse::<Rule>().is_err());
        assert!("dup=x".parse::<Rule>().is_err());
    }

    #[test]
    fn rate_limit_queues_and_tail_drops() {
        // 1 Mbit/s: a 1250-byte packet takes 10 ms on the wire.
        let rules = vec![Rule::new(Match::any()).rate(1_000_000)];
        let mut s = Shaper::new(Direction::ToServer, rules, 1);
        let now = Instant::now();
        let p = info([192, 0, 2, 11], 80);
        for k in 1..=51u64 {
            assert_eq!(
                s.decide(Some(&p), 1250, now),
                Verdict::Release(now + Duration::from_millis(10 * k))
            );
        }
        // 510 ms queued (over the 500 ms limit): the next one is dropped.
        assert_eq!(s.decide(Some(&p), 1250, now), Verdict::QueueFull);
        // Later, the link has drained.
        let later = now + Duration::from_secs(2);
        assert_eq!(
            s.decide(Some(&p), 1250, later),
            Verdict::Release(later + Duration::from_millis(10))
        );
    }

    #[test]
    fn queue_bound_in_packets() {
        // 1 Mbit/s, at most 3 packets waiting or on the wire.
        let rule: Rule = "rate=1mbit,queue=3pkt".parse().unwrap();
        assert_eq!(rule.effect.queue_packets, Some(3));
        let mut s = Shaper::new(Direction::ToServer, vec![rule], 1);
        let now = Instant::now();
        let p = info([192, 0, 2, 11], 80);
        for _ in 0..3 {
            assert!(matches!(s.decide(Some(&p), 1250, now), Verdict::Release(_)));
        }
        assert_eq!(s.decide(Some(&p), 1250, now), Verdict::QueueFull);
        // 10 ms later the first one has left: room for one more.
        let later = now + Duration::from_millis(10);
        assert_eq!(
            s.decide(Some(&p), 1250, later),
            Verdict::Release(now + Duration::from_millis(40))
        );
        assert_eq!(s.decide(Some(&p), 1250, later), Verdict::QueueFull);
        assert!("rate=1mbit,queue=xpkt".parse::<Rule>().is_err());
    }

    #[test]
    fn a_packet_bound_holds_its_packets_however_long_they_take() {
        // 100 packets of 1,500 bytes at 1 Mbit/s take 1.2 s to send, more than the default
        // time bound of 500 ms: the packet bound alone decides.
        let rule: Rule = "rate=1mbit,queue=100pkt".parse().unwrap();
        let mut s = Shaper::new(Direction::ToServer, vec![rule], 1);
        let now = Instant::now();
        let p = info([192, 0, 2, 11], 80);
        for n in 0..100 {
            let v = s.decide(Some(&p), 1500, now);
            assert!(matches!(v, Verdict::Release(_)), "packet {n}: {v:?}");
        }
        assert_eq!(s.decide(Some(&p), 1500, now), Verdict::QueueFull);
    }
}
