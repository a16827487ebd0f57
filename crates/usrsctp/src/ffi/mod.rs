//! The only door into libusrsctp: its C declarations and the safe wrappers around them. Every
//! `unsafe` of the crate that touches usrsctp is in this module; the rest of the crate calls
//! usrsctp through [`Usrsctp`] (the library-wide calls) and [`Socket`] (one usrsctp socket).
//!
//! Soundness rests on three things held here: usrsctp is initialised before any socket
//! exists ([`Usrsctp`] can only be obtained from [`Usrsctp::init`]); a socket pointer is used
//! only under its read lock and freed only under its write lock (no call races
//! `usrsctp_close`); every call into usrsctp holds one process-wide lock (libusrsctp 0.9.5 is
//! not safe against concurrent entry, see [`library`]). Callbacks from usrsctp reach the rest
//! of the crate as plain safe functions ([`Hooks`]).

#![allow(unsafe_code)]

mod bindings;
mod ip;
mod library;
mod multihome;
mod socket;

pub(crate) use bindings::*;
pub(crate) use ip::{ip_addr_of, ip_input, ip_storage, set_tunnel, storage_from_bytes};
pub(crate) use library::{batch, crc32c_ok, inside_call, Hooks, Tuning, Usrsctp};
pub(crate) use multihome::*;
pub(crate) use socket::{Accepted, Plain, Socket};
