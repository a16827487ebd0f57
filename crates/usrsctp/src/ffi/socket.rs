//! One usrsctp socket behind a safe interface: [`Socket`] owns the pointer and offers the
//! calls the crate makes on it (options, send, receive, bind, connect, listen, accept,
//! shutdown, close), each under the socket's read lock and the usrsctp lock.

use std::cell::Cell;
use std::ffi::c_void;
use std::mem::size_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::RwLock;

use libc::{c_int, socklen_t};

use super::bindings as raw;
use super::library::{hooks, serial, Usrsctp};
use crate::error::{Error, Result};

/// Plain C data that usrsctp reads and writes as bytes: every bit pattern, all-zero included,
/// is a valid value. Option values passed to [`Socket::setopt`] / [`Socket::getopt`] must be
/// `Plain`.
///
/// # Safety
/// Implement only for `Copy` types made of integers, byte arrays and other `Plain` types
/// (no references, no enums, no `bool`), laid out as the C side expects them.
pub(crate) unsafe trait Plain: Copy {
    /// The all-zero value. Free (a memset).
    fn zeroed() -> Self {
        // SAFETY: `Self: Plain`, so all-zero is a valid value (the trait's contract).
        unsafe { std::mem::zeroed() }
    }
}

// SAFETY: integers are valid for every bit pattern.
unsafe impl Plain for c_int {}
// SAFETY: a C struct of integers and byte arrays.
unsafe impl Plain for libc::sockaddr_storage {}
// SAFETY: `#[repr(C)]` structs of integers (see bindings.rs).
unsafe impl Plain for raw::sctp_initmsg {}
// SAFETY: as above.
unsafe impl Plain for raw::sctp_event {}
// SAFETY: as above.
unsafe impl Plain for raw::sctp_rtoinfo {}
// SAFETY: as above.
unsafe impl Plain for raw::sctp_assocparams {}
// SAFETY: as above.
unsafe impl Plain for raw::sctp_assoc_value {}
// SAFETY: as above.
unsafe impl Plain for raw::sctp_stream_value {}
// SAFETY: as above.
unsafe impl Plain for raw::sctp_sockstat {}
// SAFETY: integers and a `sockaddr_storage` (plain, see above).
unsafe impl Plain for raw::sctp_paddrparams {}
// SAFETY: integers and an `sctp_paddrinfo` (integers and a `sockaddr_storage`).
unsafe impl Plain for raw::sctp_status {}

thread_local! {
    /// Upcall argument of the socket this thread is currently calling usrsctp for (0: none).
    static IN_CALL: Cell<usize> = const { Cell::new(0) };
}

/// The usrsctp upcall: passes the socket's argument to [`Hooks::upcall`](super::Hooks).
/// Upcalls raised by our own call on the same socket and thread (usrsctp signals readability
/// from inside `usrsctp_recvv`, for instance) are dropped: the caller sees the outcome of its
/// call, and waking it would make it spin.
extern "C" fn upcall(_so: *mut raw::socket, arg: *mut c_void, _flags: c_int) {
    let arg = arg as usize;
    if IN_CALL.with(|c| c.get()) == arg {
        return;
    }
    let Some(hooks) = hooks() else { return };
    let _ = catch_unwind(AssertUnwindSafe(|| (hooks.upcall)(arg)));
}

/// A usrsctp socket pointer that may cross threads.
struct SoPtr(*mut raw::socket);
// SAFETY: usrsctp sockets may be used from any thread; the pointer is only used under the
// RwLock in `Socket` (and the usrsctp lock, see `serial`), and freed only under its write lock.
unsafe impl Send for SoPtr {}
// SAFETY: see above.
unsafe impl Sync for SoPtr {}

/// Builds an AF_CONN address (conn address `conn`, 0 for any; SCTP port `port`).
fn sconn(conn: usize, port: u16) -> raw::sockaddr_conn {
    raw::sockaddr_conn {
        sconn_family: raw::AF_CONN as u16,
        sconn_port: port.to_be(),
        sconn_addr: conn as *mut c_void,
    }
}

/// `Err(Error::Sys)` with errno if `rc` is not 0. Call before the usrsctp lock is released
/// (errno is per thread, but a later call on this thread would overwrite it).
pub(super) fn check(rc: c_int, op: &'static str) -> Result<()> {
    if rc != 0 {
        Err(Error::sys(op))
    } else {
        Ok(())
    }
}

/// `Ok(n)` for a non-negative byte count, else `Err(Error::Sys)` with errno.
fn count(n: isize, op: &'static str) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::sys(op))
}

/// Owns one usrsctp socket (AF_CONN, one-to-one, non-blocking, with our upcall). Every call
/// runs under a read lock and the usrsctp lock; [`Socket::close`] takes the write lock, so no
/// call can race `usrsctp_close` (no use after free). Calls after close fail with
/// [`Error::Closed`]. Dropping it closes with ABORT.
pub(crate) struct Socket {
    so: RwLock<SoPtr>,
    /// What the upcall reports to [`Hooks::upcall`](super::Hooks).
    arg: usize,
}

/// A socket returned by [`Socket::accept`], not yet set up; dropping it aborts the
/// association. [`Accepted::adopt`] turns it into a [`Socket`].
pub(crate) struct Accepted(SoPtr);

impl Accepted {
    /// Installs the upcall (reporting `arg`) and non-blocking mode. Two calls into usrsctp.
    pub(crate) fn adopt(mut self, arg: usize) -> Result<Socket> {
        let so = std::mem::replace(&mut self.0 .0, std::ptr::null_mut());
        // SAFETY: `so` came from `usrsctp_accept` (never null in an `Accepted`) and is handed
        // over: the null left behind keeps our Drop from closing it.
        unsafe { Socket::adopt(so, arg) }
    }
}

impl Drop for Accepted {
    fn drop(&mut self) {
        let so = self.0 .0;
        if !so.is_null() {
            // SAFETY: `so` came from `usrsctp_accept`, was not adopted (the pointer would be
            // null) and is not used again.
            serial(|| unsafe { close_raw(so, true) });
        }
    }
}

impl Socket {
    /// Creates an AF_CONN one-to-one socket, non-blocking, whose upcall reports `arg`. Three
    /// calls into usrsctp.
    pub(crate) fn stream(lib: Usrsctp, arg: usize) -> Result<Socket> {
        Socket::stream_of(lib, arg, raw::AF_CONN)
    }

    /// Creates a one-to-one socket of `domain` (AF_CONN, AF_INET, AF_INET6), non-blocking,
    /// whose upcall reports `arg`. Three calls into usrsctp.
    pub(super) fn stream_of(_lib: Usrsctp, arg: usize, domain: c_int) -> Result<Socket> {
        let so = serial(|| {
            // SAFETY: usrsctp is initialised (`_lib` exists); plain constructor, NULL
            // callbacks select the upcall/recv API.
            let so = unsafe {
                raw::usrsctp_socket(
                    domain,
                    raw::SOCK_STREAM,
                    raw::IPPROTO_SCTP,
                    None,
                    None,
                    0,
                    std::ptr::null_mut(),
                )
            };
            if so.is_null() {
                Err(Error::sys("usrsctp_socket"))
            } else {
                Ok(so)
            }
        })?;
        // SAFETY: `so` is a live socket fresh from `usrsctp_socket`, owned by nobody else.
        unsafe { Socket::adopt(so, arg) }
    }

    /// Takes ownership of the socket `so`: upcall and non-blocking mode. On failure the
    /// socket is closed (ABORT).
    ///
    /// # Safety
    /// `so` must be a live usrsctp socket (from `usrsctp_socket` or `usrsctp_accept`) that
    /// nothing else uses or closes.
    unsafe fn adopt(so: *mut raw::socket, arg: usize) -> Result<Socket> {
        let sock = Socket {
            so: RwLock::new(SoPtr(so)),
            arg,
        };
        sock.call(|so| {
            // SAFETY: `so` is live (read lock held); the upcall has the C signature usrsctp
            // expects and never unwinds; its argument is an opaque integer.
            let rc = unsafe { raw::usrsctp_set_upcall(so, Some(upcall), arg as *mut c_void) };
            check(rc, "usrsctp_set_upcall")?;
            // SAFETY: `so` is live.
            let rc = unsafe { raw::usrsctp_set_non_blocking(so, 1) };
            check(rc, "usrsctp_set_non_blocking")
        })?;
        Ok(sock)
    }

    /// Runs `f` with the live socket pointer, or fails with [`Error::Closed`]. `f` runs under
    /// the socket's read lock and the process-wide usrsctp lock, with upcalls for this socket
    /// on this thread suppressed.
    pub(super) fn call<R>(&self, f: impl FnOnce(*mut raw::socket) -> Result<R>) -> Result<R> {
        let guard = self.so.read().unwrap_or_else(|e| e.into_inner());
        if guard.0.is_null() {
            return Err(Error::Closed);
        }
        let so = guard.0;
        let r = serial(|| {
            let prev = IN_CALL.with(|c| c.replace(self.arg));
            let r = f(so);
            IN_CALL.with(|c| c.set(prev));
            r
        });
        drop(guard);
        r
    }

    /// `usrsctp_setsockopt(level, name, val)`; `what` names the option in the error.
    pub(crate) fn setopt<T: Plain>(
        &self,
        level: c_int,
        name: c_int,
        val: &T,
        what: &'static str,
    ) -> Result<()> {
        self.call(|so| {
            // SAFETY: `val` points to a live `T` of the given size; `so` is live.
            let rc = unsafe {
                raw::usrsctp_setsockopt(
                    so,
                    level,
                    name,
                    val as *const T as *const c_void,
                    size_of::<T>() as socklen_t,
                )
            };
            check(rc, what)
        })
    }

    /// `usrsctp_getsockopt(level, name)` into `val` (which also carries the input, e.g. an
    /// association id); `what` names the option in the error.
    pub(crate) fn getopt<T: Plain>(
        &self,
        level: c_int,
        name: c_int,
        val: &mut T,
        what: &'static str,
    ) -> Result<()> {
        self.call(|so| {
            let mut len = size_of::<T>() as socklen_t;
            // SAFETY: `val` is a live, writable `T` of `len` bytes, valid for any bytes
            // usrsctp writes (`T: Plain`); `so` is live.
            let rc = unsafe {
                raw::usrsctp_getsockopt(so, level, name, val as *mut T as *mut c_void, &mut len)
            };
            check(rc, what)
        })
    }

    /// An `IPPROTO_SCTP`-level integer option.
    pub(crate) fn sctp_opt_int(&self, name: c_int, v: c_int, what: &'static str) -> Result<()> {
        self.setopt(raw::IPPROTO_SCTP, name, &v, what)
    }

    /// `usrsctp_bind` to conn address `conn` (0: any) and SCTP port `port` (0: ephemeral).
    pub(crate) fn bind(&self, conn: usize, port: u16) -> Result<()> {
        let mut sc = sconn(conn, port);
        self.call(|so| {
            // SAFETY: `sc` is a valid sockaddr_conn for the call; `so` is live.
            let rc = unsafe {
                raw::usrsctp_bind(
                    so,
                    &mut sc as *mut raw::sockaddr_conn as *mut libc::sockaddr,
                    size_of::<raw::sockaddr_conn>() as socklen_t,
                )
            };
            check(rc, "usrsctp_bind")
        })
    }

    /// `usrsctp_connect` to SCTP port `port` behind conn address `conn`: sends INIT. On a
    /// non-blocking socket this fails with EINPROGRESS while the handshake runs.
    pub(crate) fn connect(&self, conn: usize, port: u16) -> Result<()> {
        let mut to = sconn(conn, port);
        self.call(|so| {
            // SAFETY: `to` is a valid sockaddr_conn; `so` is live.
            let rc = unsafe {
                raw::usrsctp_connect(
                    so,
                    &mut to as *mut raw::sockaddr_conn as *mut libc::sockaddr,
                    size_of::<raw::sockaddr_conn>() as socklen_t,
                )
            };
            check(rc, "usrsctp_connect")
        })
    }

    /// `usrsctp_listen` with a backlog of `backlog` associations.
    pub(crate) fn listen(&self, backlog: c_int) -> Result<()> {
        self.call(|so| {
            // SAFETY: `so` is live (read lock held by `call`).
            let rc = unsafe { raw::usrsctp_listen(so, backlog) };
            check(rc, "usrsctp_listen")
        })
    }

    /// `usrsctp_accept`: the next established association's socket and the conn address it
    /// came from. Fails with EWOULDBLOCK when none is waiting.
    pub(crate) fn accept(&self) -> Result<(Accepted, usize)> {
        let (acc, ss) = self.accept_raw()?;
        // SAFETY: usrsctp wrote a sockaddr_conn (AF_CONN socket) into the storage, which is
        // large and aligned enough for it; it is plain data, read by copy.
        let sc = unsafe { *(&ss as *const libc::sockaddr_storage as *const raw::sockaddr_conn) };
        Ok((acc, sc.sconn_addr as usize))
    }

    /// `usrsctp_accept`: the next association's socket and the peer address usrsctp wrote
    /// (of the socket's family). EWOULDBLOCK when none is waiting.
    pub(super) fn accept_raw(&self) -> Result<(Accepted, libc::sockaddr_storage)> {
        self.call(|so| {
            let mut ss = libc::sockaddr_storage::zeroed();
            let mut len = size_of::<libc::sockaddr_storage>() as socklen_t;
            // SAFETY: `ss` is a writable buffer of `len` bytes; `so` is live.
            let ns = unsafe {
                raw::usrsctp_accept(
                    so,
                    &mut ss as *mut libc::sockaddr_storage as *mut libc::sockaddr,
                    &mut len,
                )
            };
            if ns.is_null() {
                return Err(Error::sys("usrsctp_accept"));
            }
            Ok((Accepted(SoPtr(ns)), ss))
        })
    }

    /// One `usrsctp_sendv` of `data` with `info` (stream, flags, PPID), to the conn address
    /// `to` if given (a path of a multihomed association; `info` then carries
    /// `SCTP_ADDR_OVER`): the bytes usrsctp took (0 is possible, see the callers), or an
    /// error (EWOULDBLOCK: no buffer space; EINVAL: `to` is not a path of it).
    pub(crate) fn sendv(
        &self,
        data: &[u8],
        info: &raw::sctp_sndinfo,
        to: Option<&libc::sockaddr_storage>,
    ) -> Result<usize> {
        let mut info = *info;
        let mut addr = to.copied();
        let (addr_ptr, addr_cnt) = match addr.as_mut() {
            Some(a) => (a as *mut libc::sockaddr_storage as *mut libc::sockaddr, 1),
            None => (std::ptr::null_mut(), 0),
        };
        self.call(|so| {
            // SAFETY: `data`, `info` and the destination (if any) are live for the call
            // with their true sizes; `so` is live.
            let n = unsafe {
                raw::usrsctp_sendv(
                    so,
                    data.as_ptr() as *const c_void,
                    data.len(),
                    addr_ptr,
                    addr_cnt,
                    &mut info as *mut raw::sctp_sndinfo as *mut c_void,
                    size_of::<raw::sctp_sndinfo>() as socklen_t,
                    raw::SCTP_SENDV_SNDINFO,
                    0,
                )
            };
            count(n, "usrsctp_sendv")
        })
    }

    /// One `usrsctp_recvv` into `buf`: bytes read, the receive info (all-zero when usrsctp
    /// gave none) and the message flags (`MSG_EOR`, `MSG_NOTIFICATION`). EWOULDBLOCK: nothing
    /// to read.
    pub(crate) fn recvv(&self, buf: &mut [u8]) -> Result<(usize, raw::sctp_rcvinfo, c_int)> {
        self.call(|so| {
            let mut info = raw::sctp_rcvinfo::default();
            let mut infolen = size_of::<raw::sctp_rcvinfo>() as socklen_t;
            let mut infotype: u32 = 0;
            let mut flags: c_int = 0;
            let mut from = libc::sockaddr_storage::zeroed();
            let mut fromlen = size_of::<libc::sockaddr_storage>() as socklen_t;
            // SAFETY: every pointer refers to a live local or to `buf` with its true length;
            // `so` is live.
            let n = unsafe {
                raw::usrsctp_recvv(
                    so,
                    buf.as_mut_ptr() as *mut c_void,
                    buf.len(),
                    &mut from as *mut libc::sockaddr_storage as *mut libc::sockaddr,
                    &mut fromlen,
                    &mut info as *mut raw::sctp_rcvinfo as *mut c_void,
                    &mut infolen,
                    &mut infotype,
                    &mut flags,
                )
            };
            let n = count(n, "usrsctp_recvv")?;
            if infotype != raw::SCTP_RECVV_RCVINFO {
                info = raw::sctp_rcvinfo::default();
            }
            Ok((n, info, flags))
        })
    }

    /// The peer's first address (its primary path's is not necessarily first), as
    /// [`Socket::peer_addrs`] gives them; `None` when there is none.
    pub(crate) fn first_peer_addr(&self) -> Result<Option<libc::sockaddr_storage>> {
        Ok(self.peer_addrs()?.into_iter().next())
    }

    /// The peer's addresses, one per path (`usrsctp_getpaddrs`: AF_CONN, AF_INET or
    /// AF_INET6, packed back to back, each as long as its family's sockaddr), each copied
    /// into a `sockaddr_storage`. usrsctp allocates the list and we free it.
    pub(crate) fn peer_addrs(&self) -> Result<Vec<libc::sockaddr_storage>> {
        self.addr_list(false)
    }

    /// This side's addresses (`usrsctp_getladdrs`), as [`peer_addrs`](Self::peer_addrs)
    /// gives the peer's; each carries the socket's SCTP port.
    pub(crate) fn local_addrs(&self) -> Result<Vec<libc::sockaddr_storage>> {
        self.addr_list(true)
    }

    fn addr_list(&self, local: bool) -> Result<Vec<libc::sockaddr_storage>> {
        self.call(|so| {
            let mut addrs: *mut libc::sockaddr = std::ptr::null_mut();
            // SAFETY: `so` is live; usrsctp allocates the array and stores it in `addrs`.
            let n = unsafe {
                match local {
                    true => raw::usrsctp_getladdrs(so, 0, &mut addrs),
                    false => raw::usrsctp_getpaddrs(so, 0, &mut addrs),
                }
            };
            if n < 0 {
                return Err(Error::sys(match local {
                    true => "usrsctp_getladdrs",
                    false => "usrsctp_getpaddrs",
                }));
            }
            let mut out = Vec::with_capacity(n as usize);
            let mut p = addrs as *const u8;
            for _ in 0..n {
                if p.is_null() {
                    break;
                }
                // SAFETY: every entry starts with its family (u16 on Linux); `p` points at
                // the next entry of the array usrsctp allocated.
                let family = i32::from(unsafe { std::ptr::read_unaligned(p as *const u16) });
                let len = match family {
                    raw::AF_CONN => size_of::<raw::sockaddr_conn>(),
                    libc::AF_INET => size_of::<libc::sockaddr_in>(),
                    libc::AF_INET6 => size_of::<libc::sockaddr_in6>(),
                    _ => break,
                };
                let mut ss = libc::sockaddr_storage::zeroed();
                // SAFETY: the entry is `len` bytes (its family's size, which usrsctp packs),
                // within the array; `ss` is larger than any of them.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        p,
                        &mut ss as *mut libc::sockaddr_storage as *mut u8,
                        len,
                    );
                    p = p.add(len);
                }
                out.push(ss);
            }
            if !addrs.is_null() {
                // SAFETY: `addrs` came from usrsctp_getladdrs or usrsctp_getpaddrs (as
                // `local` says) and is freed once, by its pair.
                unsafe {
                    match local {
                        true => raw::usrsctp_freeladdrs(addrs),
                        false => raw::usrsctp_freepaddrs(addrs),
                    }
                };
            }
            Ok(out)
        })
    }

    /// `usrsctp_shutdown(how)`: with `SHUT_WR`, SHUTDOWN once the queued data is acknowledged.
    pub(crate) fn shutdown(&self, how: c_int) -> Result<()> {
        self.call(|so| {
            // SAFETY: `so` is live (read lock held by `call`).
            let rc = unsafe { raw::usrsctp_shutdown(so, how) };
            check(rc, "usrsctp_shutdown")
        })
    }

    /// Closes the socket. `abort`: SO_LINGER 0 first, so usrsctp sends ABORT at once instead
    /// of a graceful SHUTDOWN. Returns whether this call closed it (false: already closed).
    pub(crate) fn close(&self, abort: bool) -> bool {
        let mut guard = self.so.write().unwrap_or_else(|e| e.into_inner());
        let so = guard.0;
        if so.is_null() {
            return false;
        }
        guard.0 = std::ptr::null_mut();
        // Under the usrsctp lock: no packet of this socket's associations is being processed
        // and no callout of it runs while usrsctp frees the endpoint.
        // SAFETY: `so` is live (we hold the write lock and it was not closed); its pointer is
        // nulled above, so it is never used again.
        serial(|| unsafe { close_raw(so, abort) });
        true
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        self.close(true);
    }
}

/// SO_LINGER 0 if `abort`, then `usrsctp_close`.
///
/// # Safety
/// `so` must be a live usrsctp socket that is never used again; call under the usrsctp lock.
unsafe fn close_raw(so: *mut raw::socket, abort: bool) {
    if abort {
        let l = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: `so` is live (the caller's contract); `l` is a live linger of that size.
        unsafe {
            raw::usrsctp_setsockopt(
                so,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                &l as *const libc::linger as *const c_void,
                size_of::<libc::linger>() as socklen_t,
            )
        };
    }
    // The upcall stays installed (usrsctp would call a NULL upcall while SB_UPCALL is set);
    // it becomes a no-op once the owner forgets the socket's upcall argument.
    // SAFETY: `so` is live; the caller never uses it again.
    unsafe { raw::usrsctp_close(so) };
}
