//! Certificates and keys from PEM files, with errors that name the file and say what is
//! wrong with it.

use std::path::Path;

use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{FileProblem, SetupError};

/// Every certificate in a PEM file (at least one). Cost: reads and decodes the file.
pub(super) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, SetupError> {
    let bad = |why| SetupError::security_file(path, why);
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(pem_problem(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(pem_problem(e)))?;
    if certs.is_empty() {
        return Err(bad(FileProblem::NoCertificate));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 or SEC1). Cost: reads the file.
pub(super) fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, SetupError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        let why = match e {
            pem::Error::NoItemsFound => FileProblem::NoPrivateKey,
            e => pem_problem(e),
        };
        SetupError::security_file(path, why)
    })
}

/// What a PEM error says about the file (named by the caller).
fn pem_problem(e: pem::Error) -> FileProblem {
    match e {
        pem::Error::Io(e) => FileProblem::Unreadable(e),
        pem::Error::NoItemsFound => FileProblem::NoPem,
        e => FileProblem::BadPem(e),
    }
}
