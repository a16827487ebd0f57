//! Options and helpers every subcommand shares.

use std::net::SocketAddr;
use std::path::PathBuf;

use taps::taps_core::properties::Name;
use taps::{Context, Preference, Properties, SecurityParameters, TransportProperties};

/// A command's failure: the message and the exit code (2 for bad input, 1 otherwise).
pub(crate) struct CliError {
    message: String,
    usage: bool,
}

impl CliError {
    /// Bad input (exit code 2).
    pub(crate) fn usage(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            usage: true,
        }
    }

    /// A runtime failure (exit code 1).
    pub(crate) fn failure(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            usage: false,
        }
    }

    /// The exit code for this error.
    pub(crate) fn exit_code(&self) -> u8 {
        if self.usage {
            2
        } else {
            1
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<taps::Error> for CliError {
    fn from(e: taps::Error) -> CliError {
        let usage = matches!(
            e,
            taps::Error::Setup(
                taps::SetupError::Properties(_)
                    | taps::SetupError::Unsatisfiable(_)
                    | taps::SetupError::Config(_)
                    | taps::SetupError::SecurityFile { .. }
            )
        );
        CliError {
            message: e.to_string(),
            usage,
        }
    }
}

/// Security options of `connect` and `listen`. On `connect` any of them requires security
/// (only secure stacks are raced); on `listen`, `--cert` does. Properties that say
/// otherwise are refused beside them, never obeyed by ignoring the options.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct SecurityArgs {
    /// Also trust the certificate authorities in this PEM file (repeatable).
    #[arg(long, value_name = "FILE")]
    pub ca: Vec<PathBuf>,
    /// Verify the server's certificate against this name (and send it as SNI) instead of
    /// HOST.
    #[arg(long, value_name = "NAME")]
    pub server_name: Option<String>,
    /// Application protocols to offer (connect) or accept (listen), most preferred
    /// first, e.g. h2,http/1.1.
    #[arg(long, value_name = "LIST")]
    pub alpn: Option<String>,
    /// Certificate chain to present (PEM): a listener's certificate, or a client
    /// certificate.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The private key of --cert (PEM).
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Do not verify the server's certificate: the connection is encrypted but anyone
    /// on the path can read and change it. For throw-away test certificates only.
    #[arg(long)]
    pub insecure_skip_verify: bool,
}

impl SecurityArgs {
    /// The options given that only a secure connection can honour, by name (for the
    /// message refusing them beside properties that rule security out).
    pub(crate) fn given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        let flags = [
            ("--ca", !self.ca.is_empty()),
            ("--server-name", self.server_name.is_some()),
            ("--alpn", self.alpn.is_some()),
            ("--cert", self.cert.is_some()),
            ("--key", self.key.is_some()),
            ("--insecure-skip-verify", self.insecure_skip_verify),
        ];
        for (name, set) in flags {
            if set {
                given.push(name);
            }
        }
        given
    }

    /// The security parameters these options describe.
    pub(crate) fn params(&self) -> Result<SecurityParameters, CliError> {
        let mut p = SecurityParameters::new();
        for ca in &self.ca {
            p = p.ca_file(ca);
        }
        if let Some(name) = &self.server_name {
            p = p.server_name(name);
        }
        if let Some(list) = &self.alpn {
            let alpn = SecurityParameters::parse_alpn(list)
                .map_err(|e| CliError::usage(format!("--alpn: {e}")))?;
            p = p.alpn(alpn);
        }
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            p = p.identity(cert, key);
        }
        if self.insecure_skip_verify {
            eprintln!(
                "warning: --insecure-skip-verify: the server's certificate is not checked; \
                 the connection is encrypted but not authenticated"
            );
            p = p.danger_accept_any_certificate();
        }
        Ok(p)
    }
}

/// Options shared by commands that build a context and properties.
#[derive(clap::Args, Clone)]
pub(crate) struct ContextArgs {
    /// Transport properties in NEAT's JSON format, or @FILE to read them from a file.
    #[arg(long, value_name = "JSON|@FILE")]
    pub props: Option<String>,
    /// Directory of NEAT-format PIB profiles and policies (added to the built-in PIB).
    #[arg(long, value_name = "DIR")]
    pub pib: Option<PathBuf>,
    /// Keep the CIB (learned race outcomes) in this file across runs.
    #[arg(long, value_name = "FILE")]
    pub cib: Option<PathBuf>,
    /// DNS server to use instead of the system's (repeatable), e.g. 127.0.0.1:5353.
    #[arg(long = "name-server", value_name = "ADDR")]
    pub name_servers: Vec<SocketAddr>,
    /// UDP port SCTP is encapsulated in (RFC 6951).
    #[arg(long, value_name = "PORT", default_value_t = 9899)]
    pub sctp_udp_port: u16,
    /// Give every SCTP connection its own association instead of mapping connections to
    /// the same remote onto streams of one association.
    #[arg(long)]
    pub no_flow_mapping: bool,
}

impl ContextArgs {
    /// Builds the context.
    pub(crate) fn context(&self) -> Result<Context, CliError> {
        let mut b = Context::builder();
        if !self.name_servers.is_empty() {
            b = b.name_servers(self.name_servers.clone());
        }
        if let Some(dir) = &self.pib {
            b = b.pib_dir(dir);
        }
        if let Some(file) = &self.cib {
            b = b.cib_file(file);
        }
        b = b
            .sctp_udp_port(self.sctp_udp_port)
            .flow_mapping(!self.no_flow_mapping);
        Ok(b.build()?)
    }

    /// The properties of `taps connect`: `--props` over `base` (RFC 9622's defaults and the
    /// path options), with
    /// security required when a security option is given (`security_options`, by
    /// name). Properties that leave security anything but required beside such an option
    /// are refused: the option would be ignored and the bytes go out in the clear.
    pub(crate) fn client_properties(
        &self,
        base: TransportProperties,
        security_options: &[&str],
    ) -> Result<Properties, CliError> {
        if security_options.is_empty() {
            return self.properties(base);
        }
        let props = self.properties(base.require(Name::Security))?;
        let security = props.get(Name::Security).and_then(|e| e.as_preference());
        if security != Some(Preference::Require) {
            let level = security.map_or("a non-boolean value".into(), |p| p.to_string());
            return Err(CliError::usage(format!(
                "{} secure the connection, but --props sets security to {level}: drop those \
                 options or let the properties require security",
                security_options.join(", ")
            )));
        }
        Ok(props)
    }

    /// Parses and compiles `--props` over `base`.
    pub(crate) fn properties(&self, base: TransportProperties) -> Result<Properties, CliError> {
        let Some(text) = &self.props else {
            return Ok(base.compile().map_err(taps::Error::from)?);
        };
        let text = match text.strip_prefix('@') {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| CliError::usage(format!("--props: cannot read {path}: {e}")))?,
            None => text.clone(),
        };
        let props = base
            .merge_neat_json(&text)
            .map_err(|e| CliError::usage(format!("--props: {e}")))?;
        props
            .compile()
            .map_err(|e| CliError::usage(format!("--props: {e}")))
    }
}
