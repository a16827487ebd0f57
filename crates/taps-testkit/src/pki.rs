//! A throw-away PKI for TLS tests: a CA and leaf certificates it signs, made at run time
//! (never committed keys) and written as PEM files into a directory removed on drop.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// When a leaf certificate is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    /// From yesterday for a year.
    Current,
    /// Expired yesterday (valid for a day before that).
    Expired,
}

/// A CA (`ca`, PEM) and a leaf for the given names (`cert` and `key`, PEM), in a fresh
/// directory under the system's temporary directory.
pub struct TestPki {
    dir: PathBuf,
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// The CA certificate: what a client trusts.
    pub ca: PathBuf,
    /// The leaf certificate (signed by the CA) for the names given to [`TestPki::new`].
    pub cert: PathBuf,
    /// The leaf's private key.
    pub key: PathBuf,
}

fn err(e: rcgen::Error) -> io::Error {
    io::Error::other(e.to_string())
}

impl TestPki {
    /// A CA and a current leaf for `names` (DNS names or IP addresses). Cost: three key
    /// generations and signatures, a few file writes.
    pub fn new(names: &[&str]) -> io::Result<TestPki> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "taps-pki-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "taps test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer =
            CertifiedIssuer::self_signed(params, KeyPair::generate().map_err(err)?).map_err(err)?;
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, issuer.pem())?;
        let mut pki = TestPki {
            cert: PathBuf::new(),
            key: PathBuf::new(),
            dir,
            issuer,
            ca,
        };
        let (cert, key) = pki.leaf("leaf", names, Validity::Current)?;
        pki.cert = cert;
        pki.key = key;
        Ok(pki)
    }

    /// Another leaf signed by the same CA, written as `<stem>.pem` and `<stem>.key`.
    pub fn leaf(
        &self,
        stem: &str,
        names: &[&str],
        validity: Validity,
    ) -> io::Result<(PathBuf, PathBuf)> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).map_err(err)?;
        params.is_ca = IsCa::ExplicitNoCa;
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let now = time::OffsetDateTime::now_utc();
        let day = time::Duration::days(1);
        (params.not_before, params.not_after) = match validity {
            Validity::Current => (now - day, now + day * 365),
            Validity::Expired => (now - day * 2, now - day),
        };
        let key = KeyPair::generate().map_err(err)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(err)?;
        let cert_file = self.dir.join(format!("{stem}.pem"));
        let key_file = self.dir.join(format!("{stem}.key"));
        std::fs::write(&cert_file, cert.pem())?;
        std::fs::write(&key_file, key.serialize_pem())?;
        Ok((cert_file, key_file))
    }

    /// A certificate for `names` that is marked as a CA (`CA:TRUE`, as `openssl req
    /// -x509` makes self-signed ones), written as `<stem>.pem` and `<stem>.key`:
    /// self-signed when `self_signed`, else signed by this PKI's CA (an intermediate CA
    /// presented as a server's own certificate).
    pub fn ca_marked(
        &self,
        stem: &str,
        names: &[&str],
        validity: Validity,
        self_signed: bool,
    ) -> io::Result<(PathBuf, PathBuf)> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).map_err(err)?;
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let now = time::OffsetDateTime::now_utc();
        let day = time::Duration::days(1);
        (params.not_before, params.not_after) = match validity {
            Validity::Current => (now - day, now + day * 365),
            Validity::Expired => (now - day * 2, now - day),
        };
        let key = KeyPair::generate().map_err(err)?;
        let cert = if self_signed {
            params.self_signed(&key).map_err(err)?
        } else {
            params.signed_by(&key, &self.issuer).map_err(err)?
        };
        let cert_file = self.dir.join(format!("{stem}.pem"));
        let key_file = self.dir.join(format!("{stem}.key"));
        std::fs::write(&cert_file, cert.pem())?;
        std::fs::write(&key_file, key.serialize_pem())?;
        Ok((cert_file, key_file))
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
