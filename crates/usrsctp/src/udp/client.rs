//! A client association's own UDP socket, connected to the peer, and its reader task.

use super::*;
use crate::packet::has_chunk;

/// Client side: a fresh UDP socket connected to the peer, its conn address and reader task.
pub(crate) struct ClientLink {
    pub(crate) addr: ConnAddr,
    pub(crate) local: SocketAddr,
    /// The SCTP path MTU the kernel's route to the peer allows (see [`sctp_mtu`]).
    pub(crate) path_mtu: Option<u32>,
    pub(crate) task: Option<JoinHandle<()>>,
    /// The socket's sending handle (the same kernel socket as the reader's), to ask for
    /// an ICMP error before the reader runs ([`ClientLink::refused_already`]).
    send: Arc<StdUdp>,
    /// Set by a send that failed with `ECONNREFUSED` (see [`Route::refused`]).
    refused: Arc<AtomicBool>,
}

impl Drop for ClientLink {
    fn drop(&mut self) {
        lock(&READERS).remove(&self.addr.id);
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// What the client reader task reports.
pub(crate) trait ClientEvents: Send + Sync + 'static {
    /// An INIT ACK chunk arrived (called before the packet is given to usrsctp).
    fn init_ack(&self);
    /// The connected UDP socket reported ECONNREFUSED (ICMP port unreachable). Called
    /// before the ABORT that refusal stands for reaches usrsctp (an established
    /// association ends by that ABORT, see [`crate::refusal`]).
    fn refused(&self);
}

impl ClientLink {
    /// A fresh UDP socket connected to `remote` (bound by the connect) and its conn
    /// address. The socket comes back for [`ClientLink::start`] to register with tokio
    /// and to tune for data: not before, so that an attempt refused at once never enters
    /// the runtime's epoll set (whose changes and readiness would wake an idle worker for
    /// nothing) nor pays for buffers it never uses. Eight syscalls. With `probe`, a
    /// zero-length datagram goes to `remote` first, from the process's shared probe socket,
    /// and a refusal known by then ends the attempt with [`Error::Refused`] before any
    /// socket is made (three syscalls more; where the shared socket is missing, the new
    /// socket is probed after its connect instead;
    /// [`SctpOptions::probe_port`](crate::SctpOptions::probe_port)).
    pub(crate) fn open(remote: SocketAddr, probe: bool) -> Result<(ClientLink, Socket)> {
        let domain = if remote.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        // `None` from the shared probe (no probe socket, or its send failed): this
        // attempt's own socket is probed instead, once connected.
        let probe_own_socket = probe
            && match shared_probe_refused(remote) {
                Some(true) => return Err(Error::Refused(remote)),
                Some(false) => false,
                None => true,
            };
        let s = udp_socket(domain)?;
        s.connect(&remote.into())
            .map_err(|e| Error::udp("connect", e))?;
        if probe_own_socket && probe_refused(&s) {
            return Err(Error::Refused(remote));
        }
        let local = local_of(&s)?;
        let path_mtu =
            connected_path_mtu(&s, remote.is_ipv6()).map(|m| sctp_mtu(m, remote.is_ipv6()));
        let send: Arc<StdUdp> = Arc::new(s.try_clone().map_err(|e| Error::udp("dup", e))?.into());
        let refused = Arc::new(AtomicBool::new(false));
        let addr = ConnAddr::register(Route {
            sock: send.clone(),
            remote: None,
            src: None,
            refused: Some(refused.clone()),
            bytes: Default::default(),
        })?;
        Ok((
            ClientLink {
                addr,
                local,
                path_mtu,
                task: None,
                send,
                refused,
            },
            s,
        ))
    }

    /// Whether the peer's host already refused what was sent: a send failed with
    /// `ECONNREFUSED` (it took an ICMP port unreachable that came before it, e.g. the
    /// answer to the port probe; an atomic load), or, with `ask_socket`, the connected
    /// socket holds one (one `getsockopt(SO_ERROR)`). To the same host the kernel answers
    /// while the sending call runs, so right after the INIT the answer is known without
    /// waiting for the reader task; elsewhere the ICMP comes a round trip later and the
    /// reader reports it. Another pending error is dropped, as the reader drops it.
    pub(crate) fn refused_already(&self, ask_socket: bool) -> bool {
        self.refused.load(Ordering::Acquire)
            || (ask_socket && is_refusal(self.send.take_error().ok().flatten()))
    }

    /// Tunes `sock` (from [`ClientLink::open`]) for data, asks for its ICMP errors with
    /// what they quote (IP_RECVERR / IPV6_RECVERR), registers it with tokio and spawns its
    /// reader task.
    pub(crate) fn start(&mut self, sock: Socket, events: Arc<dyn ClientEvents>) -> Result<()> {
        tune_for_data(&sock);
        enable_recverr(&sock, self.local.is_ipv6());
        let sock =
            UdpSocket::from_std(sock.into()).map_err(|e| Error::udp("register with tokio", e))?;
        let id = self.addr.id;
        lock(&READERS).insert(
            id,
            Reader::Client {
                conn: id,
                sock: Arc::downgrade(&self.send),
            },
        );
        let count = UdpCount::new();
        self.task = Some(tokio::spawn(async move {
            let _count = count;
            let mut seen_init_ack = false;
            loop {
                let ready = match sock.ready(Interest::READABLE | Interest::ERROR).await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::debug!("usrsctp client UDP readiness: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                if ready.is_error() {
                    // ICMP errors on the connected socket. A port unreachable (nothing
                    // listens on the peer's UDP port) fails an attempt still in its
                    // handshake and ends an established association by the ABORT it
                    // stands for (`refusal`). Reading the queue to its end clears the
                    // readiness and the pending error; without IP_RECVERR only the
                    // pending error tells.
                    let _ = sock.try_io(Interest::ERROR, || {
                        let taken = take_refusals(&sock, |_| {
                            events.refused();
                            Some(id)
                        });
                        if let Err(e) = taken {
                            tracing::debug!("usrsctp client UDP error queue: {e}");
                        }
                        if is_refusal(sock.take_error().ok().flatten()) {
                            events.refused();
                        }
                        Err::<(), _>(io::ErrorKind::WouldBlock.into())
                    });
                }
                if !ready.is_readable() && !ready.is_read_closed() {
                    continue;
                }
                // Drain what is queued into this thread's buffer, without awaiting while
                // it is borrowed; `Ok(true)`: the batch was full, let other tasks run.
                let drained = with_recv_buf(|buf| {
                    for _ in 0..READ_BATCH {
                        let got = sock.try_io(Interest::READABLE, || recv_with_dst(&sock, buf))?;
                        // The INIT-ACK is signalled before usrsctp sees the read (outside
                        // its lock: `init_ack` takes a watch channel's lock).
                        if !seen_init_ack
                            && got
                                .datagrams(buf)
                                .any(|pkt| has_chunk(pkt, crate::ffi::SCTP_INITIATION_ACK))
                        {
                            seen_init_ack = true;
                            events.init_ack();
                        }
                        // One read's datagrams in one hold of the usrsctp lock, so what
                        // they release (data after SACKs, SACKs after data) leaves as one
                        // GSO send.
                        crate::ffi::batch(|| {
                            for pkt in got.datagrams(buf) {
                                conninput(id, pkt);
                            }
                        });
                    }
                    Ok::<bool, io::Error>(true)
                });
                match drained {
                    Ok(_) => tokio::task::yield_now().await,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => events.refused(),
                    Err(e) => {
                        tracing::debug!("usrsctp client UDP recv: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
        Ok(())
    }
}
