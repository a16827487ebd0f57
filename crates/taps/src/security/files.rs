//! Certificates and keys from PEM files, with errors that name the file and say what is
//! wrong with it.

use std::path::Path;

use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::SetupError;

/// Every certificate in a PEM file (at least one). Cost: reads and decodes the file.
pub(super) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, SetupError> {
    let bad = |why: String| SetupError::security_file(path, why);
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(pem_error(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(pem_error(e)))?;
    if certs.is_empty() {
        return Err(bad(
            "no certificate in it (expected PEM \"BEGIN CERTIFICATE\")".into(),
        ));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 or SEC1). Cost: reads the file.
pub(super) fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, SetupError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        let why = match e {
            pem::Error::NoItemsFound => {
                "no private key in it (expected PEM \"BEGIN PRIVATE KEY\")".to_string()
            }
            e => pem_error(e),
        };
        SetupError::security_file(path, why)
    })
}

/// A PEM error in words (the file is named by the caller).
fn pem_error(e: pem::Error) -> String {
    match e {
        pem::Error::Io(e) => format!("cannot read it: {e}"),
        pem::Error::NoItemsFound => "nothing PEM-encoded in it".into(),
        e => format!("not valid PEM: {e:?}"),
    }
}
