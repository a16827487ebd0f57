//! CMT and NR-SACK switches of one usrsctp socket (`SCTP_CMT_ON_OFF`,
//! `SCTP_NRSACK_SUPPORTED`), used by the options and by [`crate::Association::set_cmt`].

use crate::error::{Error, Result};
use crate::ffi;
use crate::sys::Sock;

/// CMT mode per association (`SCTP_CMT_ON_OFF`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmtMode {
    /// Single path at a time: data to the primary, retransmissions to an alternate.
    Off,
    /// CMT (SFR, CUC, optionally DAC): data spread over all active paths.
    Base,
    /// CMT with resource pooling (coupled congestion control), variant 1.
    Rpv1,
    /// CMT with resource pooling, variant 2.
    Rpv2,
    /// CMT with MPTCP-like coupled congestion control.
    Mptcp,
}

impl CmtMode {
    fn raw(self) -> u32 {
        match self {
            CmtMode::Off => 0,
            CmtMode::Base => 1,
            CmtMode::Rpv1 => 2,
            CmtMode::Rpv2 => 3,
            CmtMode::Mptcp => 4,
        }
    }
}

/// Applies [`crate::SctpOptions::nr_sack`] and [`crate::SctpOptions::cmt`] to a new or
/// listening socket: up to two setsockopts.
pub(crate) fn apply_options(nr_sack: bool, cmt: Option<CmtMode>, sock: &Sock) -> Result<()> {
    if nr_sack {
        let v = ffi::sctp_assoc_value {
            assoc_id: ffi::SCTP_FUTURE_ASSOC,
            assoc_value: 1,
        };
        sock.setopt(
            ffi::IPPROTO_SCTP,
            ffi::SCTP_NRSACK_SUPPORTED,
            &v,
            "SCTP_NRSACK_SUPPORTED",
        )?;
    }
    if let Some(mode) = cmt {
        match set_cmt(sock, mode) {
            // CMT is off process-wide, which is what was asked.
            Err(Error::MultihomeUnavailable(_)) if mode == CmtMode::Off => {}
            r => r?,
        }
    }
    Ok(())
}

/// `SCTP_CMT_ON_OFF` = `mode`; a clear error when CMT is off process-wide.
pub(crate) fn set_cmt(sock: &Sock, mode: CmtMode) -> Result<()> {
    let v = ffi::sctp_assoc_value {
        assoc_id: ffi::SCTP_FUTURE_ASSOC,
        assoc_value: mode.raw(),
    };
    match sock.setopt(
        ffi::IPPROTO_SCTP,
        ffi::SCTP_CMT_ON_OFF,
        &v,
        "SCTP_CMT_ON_OFF",
    ) {
        Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOPROTOOPT) => {
            Err(Error::MultihomeUnavailable(
                "SCTP CMT is off process-wide: call usrsctp::set_cmt_global with cmt: true \
                 before asking for a CMT mode"
                    .into(),
            ))
        }
        r => r,
    }
}
