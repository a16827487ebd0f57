//! `Alt-Svc` (RFC 7838): what an origin's responses say about reaching it over HTTP/3
//! elsewhere, parsed and remembered per [`Client`](super::Client) (shared by its
//! clones). The CIB keys its outcomes by endpoint, stack and address, and has no place
//! for a claim one origin makes about another authority, so this cache is the client's
//! own: it lives as long as the client, in memory only.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// An HTTP/3 alternative of an origin: `h3="host:port"` (an empty host is the origin's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alternative {
    /// The host to connect to (the origin's host when the header named none).
    pub host: String,
    /// The UDP port.
    pub port: u16,
}

/// What one `Alt-Svc` field value says about HTTP/3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AltSvc {
    /// `clear`: forget every alternative of the origin.
    Clear,
    /// The first `h3` alternative and its freshness (`ma`, 24 hours by default).
    H3(Alternative, Duration),
    /// No `h3` entry (other protocols only, or nothing that parses).
    Nothing,
}

/// The default freshness of an alternative without `ma` (RFC 7838 §3.1).
const DEFAULT_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// How many origins' alternatives a cache keeps; one more clears it.
const ORIGINS: usize = 256;

/// Parses an `Alt-Svc` field value for its first `h3` alternative; `origin_host` fills
/// an authority without a host. Cost: one pass over the value, a string for the host.
pub(crate) fn parse(value: &str, origin_host: &str) -> AltSvc {
    if value.trim() == "clear" {
        return AltSvc::Clear;
    }
    for entry in split_outside_quotes(value, ',') {
        let mut params = split_outside_quotes(entry, ';').into_iter();
        let Some((proto, authority)) = params.next().and_then(|p| p.split_once('=')) else {
            continue;
        };
        if proto.trim() != "h3" {
            continue;
        }
        let authority = authority.trim().trim_matches('"');
        let Some((host, port)) = authority.rsplit_once(':') else {
            continue;
        };
        let Ok(port) = port.parse::<u16>() else {
            continue;
        };
        let host = host.trim_matches(['[', ']']);
        let host = if host.is_empty() { origin_host } else { host };
        let mut max_age = DEFAULT_MAX_AGE;
        for p in params {
            if let Some(("ma", v)) = p.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                if let Ok(secs) = v.trim_matches('"').parse::<u64>() {
                    max_age = Duration::from_secs(secs);
                }
            }
        }
        let alt = Alternative {
            host: host.to_owned(),
            port,
        };
        return AltSvc::H3(alt, max_age);
    }
    AltSvc::Nothing
}

/// Splits `s` at `sep` where it is not inside a quoted string.
fn split_outside_quotes(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in s.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if c == sep && !quoted {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

/// Origins' HTTP/3 alternatives with their expiry. Cost: a mutex and a small map.
#[derive(Debug, Default)]
pub(crate) struct AltSvcCache(Mutex<HashMap<(String, u16), (Alternative, Instant)>>);

impl AltSvcCache {
    /// The unexpired alternative of `(host, port)`, if any.
    pub(crate) fn get(&self, host: &str, port: u16, now: Instant) -> Option<Alternative> {
        let map = super::lock(&self.0);
        let (alt, until) = map.get(&(host.to_owned(), port))?;
        (now < *until).then(|| alt.clone())
    }

    /// Learns from a response's `Alt-Svc` value for origin `(host, port)`.
    pub(crate) fn learn(&self, host: &str, port: u16, value: &str, now: Instant) {
        let mut map = super::lock(&self.0);
        match parse(value, host) {
            AltSvc::Clear => {
                map.remove(&(host.to_owned(), port));
            }
            AltSvc::H3(alt, max_age) => {
                if map.len() >= ORIGINS {
                    map.clear();
                }
                map.insert((host.to_owned(), port), (alt, now + max_age));
            }
            AltSvc::Nothing => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h3(host: &str, port: u16, secs: u64) -> AltSvc {
        let alt = Alternative {
            host: host.into(),
            port,
        };
        AltSvc::H3(alt, Duration::from_secs(secs))
    }

    #[test]
    fn parses_caddy_and_common_forms() {
        assert_eq!(
            parse(r#"h3=":443"; ma=2592000"#, "a.test"),
            h3("a.test", 443, 2592000)
        );
        assert_eq!(
            parse(r#"h2=":443", h3="b.test:8443""#, "a.test"),
            h3("b.test", 8443, 86400)
        );
        assert_eq!(parse(r#"h3="[::1]:9000";ma=60"#, "a"), h3("::1", 9000, 60));
        assert_eq!(parse("clear", "a"), AltSvc::Clear);
        assert_eq!(parse(r#"h3-29=":443""#, "a"), AltSvc::Nothing);
        assert_eq!(parse(r#"h3=":x""#, "a"), AltSvc::Nothing);
        assert_eq!(parse("", "a"), AltSvc::Nothing);
    }

    #[test]
    fn cache_expires_and_clears() {
        let c = AltSvcCache::default();
        let t = Instant::now();
        c.learn("a", 443, r#"h3=":4433"; ma=10"#, t);
        assert_eq!(c.get("a", 443, t).map(|a| a.port), Some(4433));
        assert_eq!(c.get("a", 443, t + Duration::from_secs(11)), None);
        c.learn("a", 443, "clear", t);
        assert_eq!(c.get("a", 443, t), None);
    }
}
