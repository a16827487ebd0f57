//! Messages on byte streams: a 4-byte big-endian length, then that many bytes. The
//! decoder and encoder are poll-based state machines, so a connection can be driven
//! from `async fn`s ([`crate::Connection::send`], [`crate::Connection::receive`]) and
//! from hand-written futures ([`crate::Connection::poll_send`],
//! [`crate::Connection::poll_receive`]) with the same code.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::Error;

/// The first allocation for a received message; the buffer grows as bytes arrive.
const FIRST_CHUNK: usize = 64 << 10;

/// A message being read: its length header, then its body.
#[derive(Debug, Default)]
pub(crate) struct FrameReader {
    header: [u8; 4],
    /// Header bytes read so far.
    got: usize,
    /// The body, once the header is whole.
    body: Option<Body>,
}

/// A message body being read.
#[derive(Debug)]
struct Body {
    /// Zeroed ahead of the bytes read, in steps, up to the announced length.
    buf: Vec<u8>,
    /// Bytes read.
    filled: usize,
    /// The announced length.
    len: usize,
}

impl FrameReader {
    /// Reads until one message is whole. `Ready(Ok(None))` when the stream ends before
    /// a header; a length over `max` is [`Error::MessageTooBig`] before anything is
    /// allocated; an end inside a header or body is an I/O error (`UnexpectedEof`).
    /// Pending keeps what was read for the next call. Allocations grow with the bytes
    /// that arrive (the first at most 64 KiB), never the announced length up front.
    pub(crate) fn poll_frame<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        r: &mut R,
        max: usize,
    ) -> Poll<Result<Option<Vec<u8>>, Error>> {
        while self.body.is_none() {
            if self.got == self.header.len() {
                let len = u32::from_be_bytes(self.header) as usize;
                if len > max {
                    return Poll::Ready(Err(Error::MessageTooBig { size: len, max }));
                }
                self.body = Some(Body {
                    buf: Vec::new(),
                    filled: 0,
                    len,
                });
                break;
            }
            let mut rb = ReadBuf::new(&mut self.header[self.got..]);
            ready!(Pin::new(&mut *r).poll_read(cx, &mut rb))?;
            match rb.filled().len() {
                // A clean end only between messages: the peer closed mid-header otherwise.
                0 if self.got == 0 => return Poll::Ready(Ok(None)),
                0 => {
                    let got = self.got;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the peer closed after {got} of a message's 4-byte length"),
                    )
                    .into()));
                }
                n => self.got += n,
            }
        }
        let Some(body) = &mut self.body else {
            unreachable!("the loop above ends with a body")
        };
        while body.filled < body.len {
            if body.filled == body.buf.len() {
                // Grow by what arrived so far (at least 64 KiB), never past the length.
                let grow = body
                    .buf
                    .len()
                    .max(FIRST_CHUNK)
                    .min(body.len - body.buf.len());
                body.buf.resize(body.buf.len() + grow, 0);
            }
            let mut rb = ReadBuf::new(&mut body.buf[body.filled..]);
            ready!(Pin::new(&mut *r).poll_read(cx, &mut rb))?;
            match rb.filled().len() {
                0 => {
                    let (have, len) = (body.filled, body.len);
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the peer closed after {have} of a {len}-byte message"),
                    )
                    .into()));
                }
                n => body.filled += n,
            }
        }
        let msg = self.body.take().map(|b| b.buf).unwrap_or_default();
        self.got = 0;
        Poll::Ready(Ok(Some(msg)))
    }
}

/// Reads one length-prefixed message from a byte stream: [`FrameReader`] driven to one
/// message, apart so it can be fuzzed on in-memory readers (`taps::fuzzing`). `None` when
/// the stream ends before a whole header; see [`FrameReader::poll_frame`] for the errors
/// and the cost.
#[cfg(any(test, fuzzing))]
#[cfg_attr(not(fuzzing), allow(unreachable_pub))]
pub async fn read_frame<R: AsyncRead + Unpin + ?Sized>(
    r: &mut R,
    max: usize,
) -> Result<Option<Vec<u8>>, Error> {
    let mut reader = FrameReader::default();
    std::future::poll_fn(|cx| reader.poll_frame(cx, r, max)).await
}

/// How much of the message being written has gone: header and body bytes.
#[derive(Debug, Default)]
pub(crate) struct FrameWriter {
    sent: usize,
}

impl FrameWriter {
    /// Writes `msg`'s header and body; Pending keeps the progress, and the caller
    /// repeats the same message (as with `AsyncWrite::poll_write`). A message longer
    /// than `max` is [`Error::MessageTooBig`] before anything is written.
    pub(crate) fn poll_frame<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        w: &mut W,
        msg: &[u8],
        max: usize,
    ) -> Poll<Result<(), Error>> {
        if msg.len() > max {
            return Poll::Ready(Err(Error::MessageTooBig {
                size: msg.len(),
                max,
            }));
        }
        let header = (msg.len() as u32).to_be_bytes();
        let total = header.len() + msg.len();
        while self.sent < total {
            let rest = if self.sent < header.len() {
                &header[self.sent..]
            } else {
                &msg[self.sent - header.len()..]
            };
            let n = match Pin::new(&mut *w).poll_write(cx, rest) {
                Poll::Ready(Ok(0)) => {
                    self.sent = 0;
                    return Poll::Ready(Err(io::Error::from(io::ErrorKind::WriteZero).into()));
                }
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => {
                    self.sent = 0;
                    return Poll::Ready(Err(e.into()));
                }
                Poll::Pending => return Poll::Pending,
            };
            self.sent += n;
        }
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}
