//! A DTLS session over a UDP socket: the engine (dimpl, sans-IO) driven by datagrams
//! and its timers, first for the handshake (inside the attempt's or the listener's
//! future), then by a task of its own that carries one message per DTLS record between
//! the socket and the connection ([`DtlsFlow`]).

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use dimpl::{Dtls, Output};
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio_util::sync::PollSender;

/// Largest message one DTLS record carries (2^14 bytes of plaintext, RFC 9147 4.1; a
/// record never spans datagrams, so larger messages are refused, not split).
pub(crate) const MAX_MESSAGE: usize = 1 << 14;
/// Messages queued towards the session task (sending) and towards the connection
/// (received; when the connection does not read, further ones are dropped, as a UDP
/// socket's receive buffer would drop them).
const QUEUE: usize = 256;

/// Where a session's datagrams come from and go to.
pub(super) enum Path {
    /// A socket of its own, `connect`ed to the peer (client).
    Own(UdpSocket),
    /// The listener's socket, this peer's datagrams demultiplexed to the session.
    Shared {
        socket: Arc<UdpSocket>,
        peer: SocketAddr,
        rx: mpsc::Receiver<Vec<u8>>,
    },
}

impl Path {
    async fn send(&self, datagram: &[u8]) -> io::Result<()> {
        match self {
            Path::Own(s) => s.send(datagram).await.map(drop),
            Path::Shared { socket, peer, .. } => socket.send_to(datagram, *peer).await.map(drop),
        }
    }

    /// The next datagram into `buf` (its length); `None` once the listener stopped.
    async fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match self {
            Path::Own(s) => s.recv(buf).await.map(Some),
            Path::Shared { rx, .. } => Ok(rx.recv().await.map(|d| {
                let n = d.len().min(buf.len());
                buf[..n].copy_from_slice(&d[..n]);
                n
            })),
        }
    }

    /// Local and remote address.
    fn addrs(&self) -> io::Result<(SocketAddr, SocketAddr)> {
        match self {
            Path::Own(s) => Ok((s.local_addr()?, s.peer_addr()?)),
            Path::Shared { socket, peer, .. } => Ok((socket.local_addr()?, *peer)),
        }
    }
}

/// Why a session stopped.
#[derive(Debug)]
pub(super) enum Failure {
    /// The socket failed (e.g. `ECONNREFUSED` from an ICMP port unreachable).
    Io(io::Error),
    /// The DTLS engine gave up (every dimpl error is fatal): a rejected handshake, an
    /// alert, the handshake timeout.
    Dtls(dimpl::Error),
    /// The listener stopped (no more datagrams will come).
    Gone,
}

/// What woke the session up.
enum Input {
    Datagram(usize),
    Timer,
    App(Option<Vec<u8>>),
}

/// One DTLS engine and its path, with what its output said so far.
pub(super) struct Session {
    pub(super) dtls: Dtls,
    path: Path,
    out: Vec<u8>,
    inbuf: Vec<u8>,
    wake: Option<Instant>,
    /// The peer's leaf certificate (DER), taken by whoever verifies it.
    pub(super) peer_cert: Option<Vec<u8>>,
    /// The handshake finished.
    pub(super) connected: bool,
    /// Some datagram came from the peer (it is reachable).
    pub(super) answered: bool,
    peer_closed: bool,
    inbox: VecDeque<Vec<u8>>,
}

impl Session {
    pub(super) fn new(dtls: Dtls, path: Path) -> Session {
        Session {
            dtls,
            path,
            out: vec![0; 2048],
            inbuf: vec![0; 65536],
            wake: None,
            peer_cert: None,
            connected: false,
            answered: false,
            peer_closed: false,
            inbox: VecDeque::new(),
        }
    }

    /// Sends what the engine queued and notes what it reported, until it names its next
    /// timer, or until it hands over the peer's certificate: then the caller verifies it
    /// before anything that follows (a client's Finished) goes out, and flushes again.
    pub(super) async fn flush(&mut self) -> Result<(), Failure> {
        loop {
            match self.dtls.poll_output(&mut self.out) {
                Output::Packet(p) => self.path.send(p).await.map_err(Failure::Io)?,
                Output::BufferTooSmall { needed } => self.out.resize(needed, 0),
                Output::Timeout(t) => {
                    self.wake = Some(t);
                    return Ok(());
                }
                Output::Connected => self.connected = true,
                Output::PeerCert(c) => {
                    self.peer_cert = Some(c.to_vec());
                    return Ok(());
                }
                Output::ApplicationData(d) => self.inbox.push_back(d.to_vec()),
                Output::CloseNotify => self.peer_closed = true,
                _ => {}
            }
        }
    }

    /// Waits for a datagram, the engine's timer or (with `app`) a message to send, feeds
    /// it to the engine and flushes. `Ok(false)` when `app` closed: the session sent its
    /// close_notify and is done.
    pub(super) async fn step(
        &mut self,
        app: Option<&mut mpsc::Receiver<Vec<u8>>>,
    ) -> Result<bool, Failure> {
        let wake = self.wake;
        let input = tokio::select! {
            r = self.path.recv(&mut self.inbuf) => match r.map_err(Failure::Io)? {
                Some(n) => Input::Datagram(n),
                None => return Err(Failure::Gone),
            },
            _ = sleep_until(wake) => Input::Timer,
            m = next_message(app) => Input::App(m),
        };
        // dimpl's clock moves only when told, before every input.
        self.dtls
            .handle_timeout(Instant::now())
            .map_err(Failure::Dtls)?;
        let fed = match input {
            Input::Datagram(n) => {
                self.answered = true;
                self.dtls.handle_packet(&self.inbuf[..n])
            }
            Input::Timer => Ok(()),
            Input::App(Some(m)) => self.dtls.send_application_data(&m).map(drop),
            Input::App(None) => {
                let _ = self.dtls.close();
                let _ = self.flush().await;
                return Ok(false);
            }
        };
        fed.map_err(Failure::Dtls)?;
        self.flush().await?;
        Ok(true)
    }
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
        None => std::future::pending().await,
    }
}

async fn next_message(app: Option<&mut mpsc::Receiver<Vec<u8>>>) -> Option<Vec<u8>> {
    match app {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// An established DTLS session as a connection sees it: messages to and from the task
/// that runs the session. Dropping it ends the session (close_notify) and, for a
/// client, closes its socket.
#[derive(Debug)]
pub(crate) struct DtlsFlow {
    tx: PollSender<Vec<u8>>,
    rx: mpsc::Receiver<io::Result<Vec<u8>>>,
    /// Local address.
    pub(crate) local: SocketAddr,
    /// The peer's address.
    pub(crate) peer: SocketAddr,
}

impl DtlsFlow {
    /// The flow of a session whose handshake is done, and the future that runs the
    /// session from now on (spawn it, or await it in the task that ran the handshake).
    pub(super) fn new(
        session: Session,
    ) -> io::Result<(DtlsFlow, impl std::future::Future<Output = ()> + Send)> {
        let (local, peer) = session.path.addrs()?;
        let (app_tx, app_rx) = mpsc::channel(QUEUE);
        let (in_tx, in_rx) = mpsc::channel(QUEUE);
        let flow = DtlsFlow {
            tx: PollSender::new(app_tx),
            rx: in_rx,
            local,
            peer,
        };
        Ok((flow, drive(session, app_rx, in_tx)))
    }

    /// The next message; `None` once the peer closed (close_notify) or the listener
    /// stopped.
    pub(crate) fn poll_receive(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Option<Vec<u8>>>> {
        self.rx.poll_recv(cx).map(Option::transpose)
    }

    /// One message per read, as a UDP socket's `recv`: what does not fit `buf` is
    /// dropped.
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match ready!(self.rx.poll_recv(cx)) {
            Some(Ok(d)) => {
                let n = d.len().min(buf.remaining());
                buf.put_slice(&d[..n]);
                Poll::Ready(Ok(()))
            }
            Some(Err(e)) => Poll::Ready(Err(e)),
            None => Poll::Ready(Ok(())),
        }
    }

    /// One write is one message (one record).
    pub(crate) fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        check_size(data.len())?;
        ready!(self.tx.poll_reserve(cx)).map_err(|_| ended())?;
        self.tx.send_item(data.to_vec()).map_err(|_| ended())?;
        Poll::Ready(Ok(data.len()))
    }
}

fn check_size(len: usize) -> io::Result<()> {
    if len > MAX_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a message of {len} bytes does not fit one DTLS record ({MAX_MESSAGE} bytes at most)"),
        ));
    }
    Ok(())
}

fn ended() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the DTLS session has ended")
}

/// Runs an established session until the connection is dropped (then sends
/// close_notify), the peer closes, the engine fails or the listener stops. Socket
/// errors (ICMP unreachable for an earlier datagram) are handed to the connection and
/// the session goes on, as on plain UDP.
async fn drive(
    mut session: Session,
    mut app: mpsc::Receiver<Vec<u8>>,
    to_app: mpsc::Sender<io::Result<Vec<u8>>>,
) {
    loop {
        while let Some(m) = session.inbox.pop_front() {
            let _ = to_app.try_send(Ok(m));
        }
        if session.peer_closed {
            return;
        }
        match session.step(Some(&mut app)).await {
            Ok(true) => {}
            Ok(false) | Err(Failure::Gone) => return,
            Err(Failure::Io(e)) => {
                let _ = to_app.try_send(Err(e));
            }
            Err(Failure::Dtls(e)) => {
                let _ = to_app.try_send(Err(io::Error::other(format!("DTLS: {e}"))));
                return;
            }
        }
    }
}
