//! A test wire: a UDP relay on loopback between two endpoints of one path, counting what it
//! carries by SCTP chunk type (and DATA bytes per stream), with a switch that drops
//! everything (a dead link). Real sockets; only the test uses it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// What one relay saw (both directions together unless noted).
#[derive(Default)]
pub(crate) struct WireStats {
    /// DATA payload bytes per stream, side A to side B.
    pub(crate) data_ab: Mutex<HashMap<u16, u64>>,
    /// DATA payload bytes per stream, side B to side A.
    pub(crate) data_ba: Mutex<HashMap<u16, u64>>,
    pub(crate) heartbeats: AtomicU64,
    pub(crate) heartbeat_acks: AtomicU64,
    pub(crate) nr_sacks: AtomicU64,
    pub(crate) sacks: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) down: AtomicBool,
}

impl WireStats {
    /// DATA payload bytes A→B, all streams.
    pub(crate) fn data_ab_total(&self) -> u64 {
        self.data_ab.lock().unwrap().values().sum()
    }

    /// DATA payload bytes A→B on `stream`.
    pub(crate) fn data_ab_stream(&self, stream: u16) -> u64 {
        self.data_ab
            .lock()
            .unwrap()
            .get(&stream)
            .copied()
            .unwrap_or(0)
    }
}

/// A relay: side A (bound on `a_bind`) faces one endpoint, side B (bound on `b_bind`) the
/// other. Dropping it stops both directions.
pub(crate) struct Relay {
    pub(crate) a_addr: SocketAddr,
    pub(crate) b_addr: SocketAddr,
    pub(crate) stats: Arc<WireStats>,
    a: Option<UdpSocket>,
    b: Option<UdpSocket>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn count(stats: &WireStats, pkt: &[u8], a_to_b: bool) {
    let mut off = 12;
    while off + 4 <= pkt.len() {
        let ty = pkt[off];
        let len = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]) as usize;
        if len < 4 {
            return;
        }
        match ty {
            0 if len >= 16 && off + 10 <= pkt.len() => {
                let sid = u16::from_be_bytes([pkt[off + 8], pkt[off + 9]]);
                let m = if a_to_b {
                    &stats.data_ab
                } else {
                    &stats.data_ba
                };
                *m.lock().unwrap().entry(sid).or_default() += (len - 16) as u64;
            }
            3 => {
                stats.sacks.fetch_add(1, Ordering::Relaxed);
            }
            4 => {
                stats.heartbeats.fetch_add(1, Ordering::Relaxed);
            }
            5 => {
                stats.heartbeat_acks.fetch_add(1, Ordering::Relaxed);
            }
            16 => {
                stats.nr_sacks.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        off += (len + 3) & !3;
    }
}

impl Relay {
    pub(crate) async fn bind(a_bind: &str, b_bind: &str) -> Relay {
        let a = UdpSocket::bind(a_bind).await.unwrap();
        let b = UdpSocket::bind(b_bind).await.unwrap();
        Relay {
            a_addr: a.local_addr().unwrap(),
            b_addr: b.local_addr().unwrap(),
            stats: Arc::default(),
            a: Some(a),
            b: Some(b),
            tasks: Vec::new(),
        }
    }

    /// Starts forwarding. `a_peer`: the endpoint behind side A (None: learned from the first
    /// datagram A receives); `b_peer`: the endpoint behind side B.
    pub(crate) fn start(&mut self, a_peer: Option<SocketAddr>, b_peer: SocketAddr) {
        let a = Arc::new(self.a.take().unwrap());
        let b = Arc::new(self.b.take().unwrap());
        let a_peer = Arc::new(Mutex::new(a_peer));
        let (st, a1, b1, ap) = (self.stats.clone(), a.clone(), b.clone(), a_peer.clone());
        self.tasks.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            loop {
                let Ok((n, from)) = a1.recv_from(&mut buf).await else {
                    continue;
                };
                ap.lock().unwrap().get_or_insert(from);
                if st.down.load(Ordering::SeqCst) {
                    st.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                count(&st, &buf[..n], true);
                let _ = b1.send_to(&buf[..n], b_peer).await;
            }
        }));
        let st = self.stats.clone();
        self.tasks.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            loop {
                let Ok((n, _)) = b.recv_from(&mut buf).await else {
                    continue;
                };
                if st.down.load(Ordering::SeqCst) {
                    st.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let to = *a_peer.lock().unwrap();
                if let Some(to) = to {
                    count(&st, &buf[..n], false);
                    let _ = a.send_to(&buf[..n], to).await;
                }
            }
        }));
    }
}
