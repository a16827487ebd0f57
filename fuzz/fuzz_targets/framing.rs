//! The message framing on byte streams (`taps::fuzzing::read_frame`, what `Connection::receive`
//! runs on TCP/TLS/QUIC streams): 4-byte big-endian length, then the message. The stream
//! arrives in chunks the input chooses. Invariants: decoded messages are exactly the
//! bytes after each header; a length over the limit is an error before any allocation;
//! a stream cut inside a header or a body is an error, cut between frames a clean end.
#![no_main]

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncRead, ReadBuf};

/// 16 MiB, `Connection`'s limit.
const MAX: usize = 16 << 20;

/// Hands out the stream in chunks of the sizes given (cycled), like TCP segments.
struct Chunked<'a> {
    data: &'a [u8],
    sizes: &'a [u8],
    turn: usize,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let size = match self.sizes {
            [] => usize::MAX,
            s => usize::from(s[self.turn % s.len()]).max(1),
        };
        self.turn += 1;
        let n = size.min(self.data.len()).min(buf.remaining());
        let (head, tail) = self.data.split_at(n);
        buf.put_slice(head);
        self.data = tail;
        Poll::Ready(Ok(()))
    }
}

fuzz_target!(|data: &[u8]| {
    // First byte: how many chunk sizes follow.
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 16).min(rest.len());
    let (sizes, stream) = rest.split_at(n);
    let mut reader = Chunked {
        data: stream,
        sizes,
        turn: 0,
    };
    let mut offset = 0usize;
    // The reader is never pending: one poll finishes each frame, no runtime needed.
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut run = std::pin::pin!(async {
        loop {
            let left = &stream[offset..];
            match taps::fuzzing::read_frame(&mut reader, MAX).await {
                Ok(Some(msg)) => {
                    assert!(left.len() >= 4);
                    let len = u32::from_be_bytes(left[..4].try_into().unwrap()) as usize;
                    assert_eq!(msg.len(), len);
                    assert_eq!(&msg[..], &left[4..4 + len]);
                    offset += 4 + len;
                }
                Ok(None) => {
                    assert!(left.is_empty(), "end with {} bytes left", left.len());
                    break;
                }
                Err(taps::Error::MessageTooBig { size, max }) => {
                    assert_eq!(max, MAX);
                    assert!(size > MAX);
                    let len = u32::from_be_bytes(left[..4].try_into().unwrap()) as usize;
                    assert_eq!(size, len);
                    break;
                }
                Err(e) if left.len() < 4 => {
                    // A header cut short.
                    assert!(!left.is_empty(), "{e} at a clean end");
                    break;
                }
                Err(e) => {
                    // Or a body cut short.
                    let len = u32::from_be_bytes(left[..4].try_into().unwrap()) as usize;
                    assert!(left.len() - 4 < len, "{e} on a whole frame");
                    break;
                }
            }
        }
    });
    assert!(
        run.as_mut().poll(&mut cx).is_ready(),
        "framing waited on a ready reader"
    );
});
