//! How a QUIC connection ended, in words: the peer's close code and reason (quinn's
//! stream errors say only "connection lost").

use std::fmt;
use std::io;

use quinn::ConnectionError;

use super::{crypto_alert, with_reason};

/// The words of a connection that ended by the peer's (or the network's) doing: the
/// peer's application or transport close with its code and reason, a stateless reset, a
/// timeout. `h3`: the application is HTTP/3 (its ALPN), whose error codes get their
/// names (RFC 9114 8.1). `None` for quinn's own conditions (closed locally, ...).
pub(super) fn close_words(e: &ConnectionError, h3: bool) -> Option<String> {
    Some(match e {
        ConnectionError::ApplicationClosed(c) => {
            let code = c.error_code.into_inner();
            let name = h3.then(|| h3_error(code)).flatten();
            let words = match name {
                Some(name) => format!(
                    "the peer closed the QUIC connection with application error {code:#x} \
                     ({name})"
                ),
                None => {
                    format!("the peer closed the QUIC connection with application error {code:#x}")
                }
            };
            with_reason(words, &String::from_utf8_lossy(&c.reason))
        }
        ConnectionError::ConnectionClosed(c) => {
            let code = u64::from(c.error_code);
            let what = match crypto_alert(c.error_code) {
                Some(alert) => super::super::failure::alert_words(alert),
                None => c.error_code.to_string(),
            };
            with_reason(
                format!(
                    "the peer closed the QUIC connection with transport error {code:#x}: {what}"
                ),
                &String::from_utf8_lossy(&c.reason),
            )
        }
        ConnectionError::Reset => "the peer reset the QUIC connection (stateless reset: it \
                                    no longer knows it)"
            .into(),
        ConnectionError::TimedOut => {
            "the QUIC connection timed out: nothing heard from the peer within the idle \
             timeout"
                .into()
        }
        ConnectionError::VersionMismatch => {
            "the peer implements no QUIC version this side does".into()
        }
        _ => return None,
    })
}

/// The name of an HTTP/3 error code (RFC 9114 8.1).
fn h3_error(code: u64) -> Option<&'static str> {
    Some(match code {
        0x100 => "H3_NO_ERROR",
        0x101 => "H3_GENERAL_PROTOCOL_ERROR",
        0x102 => "H3_INTERNAL_ERROR",
        0x103 => "H3_STREAM_CREATION_ERROR",
        0x104 => "H3_CLOSED_CRITICAL_STREAM",
        0x105 => "H3_FRAME_UNEXPECTED",
        0x106 => "H3_FRAME_ERROR",
        0x107 => "H3_EXCESSIVE_LOAD",
        0x108 => "H3_ID_ERROR",
        0x109 => "H3_SETTINGS_ERROR",
        0x10a => "H3_MISSING_SETTINGS",
        0x10b => "H3_REQUEST_REJECTED",
        0x10c => "H3_REQUEST_CANCELLED",
        0x10d => "H3_REQUEST_INCOMPLETE",
        0x10e => "H3_MESSAGE_ERROR",
        0x10f => "H3_CONNECT_ERROR",
        0x110 => "H3_VERSION_FALLBACK",
        _ => return None,
    })
}

/// A QUIC connection that ended under an open stream: how (quinn's error kept as the
/// source).
#[derive(Debug)]
struct Ended {
    error: ConnectionError,
    words: String,
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.words)
    }
}

impl std::error::Error for Ended {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// A stream's I/O error whose connection ended (quinn's `ConnectionLost`, which reads
/// "connection lost" and nothing more) as one that says how; other errors as they are.
/// `h3` as for [`close_words`].
pub(super) fn stream_error(e: io::Error, h3: bool) -> io::Error {
    let lost = e.get_ref().and_then(|inner| {
        if let Some(quinn::ReadError::ConnectionLost(c)) = inner.downcast_ref() {
            return Some(c.clone());
        }
        if let Some(quinn::WriteError::ConnectionLost(c)) = inner.downcast_ref() {
            return Some(c.clone());
        }
        None
    });
    let Some(error) = lost else {
        return e;
    };
    match close_words(&error, h3) {
        Some(words) => io::Error::new(e.kind(), Ended { error, words }),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peers_close_keeps_its_code_and_reason() {
        let app = ConnectionError::ApplicationClosed(quinn::ApplicationClose {
            error_code: quinn::VarInt::from_u32(0x106),
            reason: b"bad frame"[..].into(),
        });
        let w = close_words(&app, true).unwrap();
        assert!(
            w.contains("0x106") && w.contains("H3_FRAME_ERROR") && w.ends_with("(bad frame)"),
            "{w}"
        );
        assert!(!close_words(&app, false).unwrap().contains("H3_"));
        let lost = io::Error::from(quinn::ReadError::ConnectionLost(app));
        assert_eq!(lost.to_string(), "connection lost");
        assert!(stream_error(lost, false).to_string().contains("0x106"));
    }
}
