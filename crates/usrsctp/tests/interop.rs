//! Interoperability with webrtc-sctp 0.17 (an independent, pure-Rust SCTP) over UDP on
//! loopback, both directions, several streams. webrtc-sctp uses the same SCTP port on both
//! ends (5000 by default).

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::time::timeout;
use usrsctp::{SctpOptions, SctpStack};
use webrtc_sctp::association::{Association as WAssociation, Config};
use webrtc_sctp::chunk::chunk_payload_data::PayloadProtocolIdentifier;
use webrtc_util::conn::conn_disconnected_packet::DisconnectedPacketConn;

const T: Duration = Duration::from_secs(20);
const PPID_BINARY: u32 = 53;

fn config(conn: Arc<dyn webrtc_util::Conn + Send + Sync>, name: &str, port: u16) -> Config {
    Config {
        net_conn: conn,
        max_receive_buffer_size: 0,
        max_message_size: 0,
        mtu: 0,
        name: name.into(),
        local_port: port,
        remote_port: port,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usrsctp_client_to_webrtc_server() {
    let udp = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let server_addr = udp.local_addr().unwrap();
    let conn = Arc::new(DisconnectedPacketConn::new(udp));
    let server =
        tokio::spawn(async move { WAssociation::server(config(conn, "server", 5001)).await });

    // SCTP ports are process-wide in usrsctp: the other test listens on 5000, so use 5001.
    let opts = SctpOptions {
        local_port: 5001,
        streams: 16,
        path_mtu: Some(WEBRTC_MTU),
        ..SctpOptions::default()
    };
    let c = SctpStack::global()
        .connect(server_addr, 5001, &opts)
        .unwrap();
    let client = timeout(T, c.into_future()).await.unwrap().unwrap();
    let wserver = timeout(T, server).await.unwrap().unwrap().unwrap();

    for s in [0u16, 3, 7] {
        for i in 0..5 {
            client
                .send(s, format!("s{s} m{i}").as_bytes(), true, PPID_BINARY)
                .await
                .unwrap();
        }
    }
    let mut buf = vec![0u8; 65536];
    for _ in 0..3 {
        let stream = timeout(T, wserver.accept_stream()).await.unwrap().unwrap();
        let s = stream.stream_identifier();
        for i in 0..5 {
            let (n, ppi) = timeout(T, stream.read_sctp(&mut buf))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&buf[..n], format!("s{s} m{i}").as_bytes());
            assert_eq!(ppi, PayloadProtocolIdentifier::Binary);
        }
        // Reply on the same stream.
        stream
            .write_sctp(
                &Bytes::from(format!("reply {s}")),
                PayloadProtocolIdentifier::Binary,
            )
            .await
            .unwrap();
    }
    let mut replies = Vec::new();
    for _ in 0..3 {
        let m = timeout(T, client.recv()).await.unwrap().unwrap().unwrap();
        assert_eq!(m.ppid, PPID_BINARY);
        assert_eq!(m.data, format!("reply {}", m.stream).as_bytes());
        replies.push(m.stream);
    }
    replies.sort();
    assert_eq!(replies, vec![0, 3, 7]);
    let _ = wserver.close().await;
}

/// webrtc-sctp reads datagrams of at most 8 KiB (its `RECEIVE_MTU`), and usrsctp would
/// send 64 KiB ones on loopback (the route's MTU): ours must stay under it.
const WEBRTC_MTU: u32 = 1200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webrtc_client_to_usrsctp_server() {
    let l = SctpStack::global()
        .listen(
            "127.0.0.1:0".parse().unwrap(),
            5000,
            &SctpOptions {
                path_mtu: Some(WEBRTC_MTU),
                ..SctpOptions::default()
            },
        )
        .unwrap();
    let udp = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    udp.connect(l.local_addr()).await.unwrap();
    let wclient =
        tokio::spawn(async move { WAssociation::client(config(udp, "client", 5000)).await });
    let (server, _peer) = timeout(T, l.accept()).await.unwrap().unwrap();
    let wclient = timeout(T, wclient).await.unwrap().unwrap().unwrap();

    let mut streams = Vec::new();
    for s in [1u16, 2, 9] {
        let st = wclient
            .open_stream(s, PayloadProtocolIdentifier::Binary)
            .await
            .unwrap();
        for i in 0..5 {
            st.write(&Bytes::from(format!("s{s} m{i}"))).await.unwrap();
        }
        streams.push(st);
    }
    let mut next = std::collections::HashMap::new();
    for _ in 0..15 {
        let m = timeout(T, server.recv()).await.unwrap().unwrap().unwrap();
        let i = next.entry(m.stream).or_insert(0);
        assert_eq!(m.data, format!("s{} m{}", m.stream, i).as_bytes());
        assert_eq!(m.ppid, PPID_BINARY);
        *i += 1;
    }
    assert_eq!(next.len(), 3);
    // Replies, including one larger than webrtc's MTU (fragmented and reassembled).
    let big: Vec<u8> = (0..50_000u32).map(|i| i as u8).collect();
    for st in &streams {
        server
            .send(st.stream_identifier(), &big, true, PPID_BINARY)
            .await
            .unwrap();
    }
    let mut buf = vec![0u8; 65536];
    for st in &streams {
        let (n, _) = timeout(T, st.read_sctp(&mut buf)).await.unwrap().unwrap();
        assert_eq!(&buf[..n], &big[..]);
    }
    let _ = wclient.close().await;
}
