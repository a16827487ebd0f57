//! Without libusrsctp: the crate loads the library only when SCTP is first used, so a
//! process where it cannot be loaded (here `TAPS_USRSCTP_LIB` names a file that does not
//! exist, set before the first use) gets an error that names the file and what to install
//! from every call that needs it, and nothing is left behind. A process of its own (the
//! library is loaded, or not, once per process).

mod common;

use usrsctp::{Error, SctpOptions, SctpStack};

#[tokio::test]
async fn a_missing_library_is_an_error_that_says_what_to_install() {
    let missing = "/nonexistent/taps-test/libusrsctp.so.2";
    // The only test of this process, so no other thread reads the environment meanwhile.
    std::env::set_var("TAPS_USRSCTP_LIB", missing);
    let stack = SctpStack::global();
    let Err(Error::Unavailable(why)) = stack.availability() else {
        panic!("the stack must say it is unavailable");
    };
    assert!(why.contains(missing), "{why}");
    let opts = SctpOptions::default();

    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let Err(err) = stack.connect(udp.local_addr().unwrap(), 5000, &opts) else {
        panic!("connect must fail without the library");
    };
    let Error::Unavailable(text) = &err else {
        panic!("expected Error::Unavailable, got {err:?}");
    };
    assert!(text.contains(missing), "{text}");
    assert!(text.contains("install libusrsctp2"), "{text}");

    let Err(err) = stack.listen("127.0.0.1:0".parse().unwrap(), 5000, &opts) else {
        panic!("listen must fail without the library");
    };
    assert!(matches!(err, Error::Unavailable(_)), "{err:?}");

    // The UDP sockets opened before the library was needed are gone again.
    assert_eq!(common::settle(stack, 0).await, 0);
}
