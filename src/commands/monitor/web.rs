//! `--web-config FILE`: TLS and basic auth for `/metrics`, in the web
//! configuration format that Prometheus' exporters share (exporter-toolkit):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt      # PEM; relative paths from the file's directory
//!   key_file: server.key       # PEM, PKCS#8 or RSA, unencrypted
//! basic_auth_users:
//!   prometheus: $2y$10$...     # bcrypt hashes (htpasswd -B, or Python's bcrypt)
//! ```
//!
//! What rtscope cannot honour is refused, naming the key: client
//! certificates (`client_auth_type` other than `NoClientCert`), TLS 1.3
//! only (`min_version: TLS13`), cipher suite and curve choices, response
//! headers. TLS is 1.2 or 1.3 with rustls' safe defaults.

use anyhow::{Result, anyhow, bail};
use base64::Engine;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The highest bcrypt cost taken. Each step doubles a check's time: cost
/// 10 (Prometheus' documentation's example) takes about 60 ms on a 2-vCPU
/// guest, 12 about 250 ms, 31 days. The first scrape with a credential
/// pays one check (later ones are cached), and it must come well within
/// Prometheus' scrape timeout (10 s by default) on a slow board too;
/// exporter-toolkit takes any cost, and a `$2b$31$` hash hangs it.
pub const MAX_BCRYPT_COST: u32 = 12;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    http_server_config: Option<HttpFile>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    client_ca_file: Option<PathBuf>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    curve_preferences: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpFile {
    /// HTTP/2 is offered by exporter-toolkit when TLS is on; rtscope
    /// speaks HTTP/1.1, which every scraper speaks too.
    #[allow(dead_code)]
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// What `--web-config` asks for.
pub struct WebConfig {
    /// The TLS server configuration: the certificate chain and its key.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// User -> bcrypt hash; empty: no authentication.
    pub users: BTreeMap<String, String>,
}

/// The base64 bodies of a PEM file's blocks labelled `label`; an error
/// when a block does not decode (the TLS library would stop on it).
fn pem_blocks(text: &str, label: &str) -> Result<usize, String> {
    let (begin, end) = (format!("-----BEGIN {label}-----"), format!("-----END {label}-----"));
    let mut n = 0;
    let mut rest = text;
    while let Some(at) = rest.find(&begin) {
        let after = &rest[at + begin.len()..];
        let stop = after.find(&end).ok_or_else(|| format!("a {label} block has no END line"))?;
        let body: String = after[..stop].split_whitespace().collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|e| format!("a {label} block is not valid base64 ({e})"))?;
        n += 1;
        rest = &after[stop + end.len()..];
    }
    Ok(n)
}

fn read(flag_file: &Path, dir: &Path, path: &Path, key: &str) -> Result<Vec<u8>> {
    let full = dir.join(path);
    let what = format!("--web-config {}: {key} {}", flag_file.display(), full.display());
    crate::sys::fs::read_input(&full, &what, "give a PEM file").map_err(anyhow::Error::msg)
}

impl WebConfig {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<WebConfig> {
        let what = format!("--web-config {}", path.display());
        let text =
            crate::sys::fs::read_input_text(path, &what, "give a web configuration").map_err(anyhow::Error::msg)?;
        let f: File = if text.trim().is_empty() {
            File::default()
        } else {
            serde_yaml::from_str(&text).map_err(|e| anyhow!("--web-config {}: {e}", path.display()))?
        };
        let what = |m: &str| anyhow!("--web-config {}: {m}", path.display());
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut tls = None;
        if let Some(t) = f.tls_server_config {
            match t.client_auth_type.as_deref() {
                None | Some("NoClientCert") => {}
                Some(other) => bail!(what(&format!(
                    "client_auth_type {other}: client certificates are not supported; use basic_auth_users, or a \
                     proxy in front that checks them"
                ))),
            }
            if t.client_ca_file.is_some() {
                bail!(what("client_ca_file: client certificates are not supported; use basic_auth_users"));
            }
            match t.min_version.as_deref() {
                None | Some("TLS10") | Some("TLS11") | Some("TLS12") => {}
                Some(v) => bail!(what(&format!("min_version {v}: rtscope serves TLS 1.2 and 1.3; leave it out"))),
            }
            if t.max_version.is_some()
                || t.cipher_suites.is_some()
                || t.curve_preferences.is_some()
                || t.prefer_server_cipher_suites.is_some()
            {
                bail!(what(
                    "max_version, cipher_suites, curve_preferences and prefer_server_cipher_suites are not \
                     supported (TLS 1.2 and 1.3 with rustls' safe defaults): leave them out"
                ));
            }
            let (Some(cert), Some(key)) = (t.cert_file, t.key_file) else {
                bail!(what("tls_server_config needs both cert_file and key_file"));
            };
            let cert_pem = read(path, dir, &cert, "cert_file")?;
            let key_pem = read(path, dir, &key, "key_file")?;
            let certs = pem_blocks(&String::from_utf8_lossy(&cert_pem), "CERTIFICATE")
                .map_err(|e| what(&format!("cert_file {}: {e}", cert.display())))?;
            if certs == 0 {
                bail!(what(&format!("cert_file {}: no PEM CERTIFICATE in it", cert.display())));
            }
            let key_text = String::from_utf8_lossy(&key_pem);
            let keys = pem_blocks(&key_text, "PRIVATE KEY")
                .and_then(|a| pem_blocks(&key_text, "RSA PRIVATE KEY").map(|b| a + b))
                .map_err(|e| what(&format!("key_file {}: {e}", key.display())))?;
            if keys == 0 {
                bail!(what(&format!(
                    "key_file {}: no unencrypted PKCS#8 or RSA private key in it (convert one with `openssl pkcs8 \
                     -topk8 -nocrypt -in KEY -out KEY.pk8`)",
                    key.display()
                )));
            }
            tls = Some(tls_config(&cert_pem, &key_pem).map_err(|e| {
                what(&format!(
                    "cert_file {} and key_file {}: {e} (check that the key belongs to the certificate)",
                    cert.display(),
                    key.display()
                ))
            })?);
        }
        if let Some(h) = f.http_server_config
            && h.headers.is_some_and(|m| !m.is_empty())
        {
            bail!(what("http_server_config.headers is not supported: leave it out"));
        }
        for (user, hash) in &f.basic_auth_users {
            if user.contains(':') {
                bail!(what(&format!("basic_auth_users: user '{user}' has a ':', which basic auth cannot carry")));
            }
            // Parsed, not checked by hashing: a costly hash is refused
            // before it costs anything.
            let Ok(parts) = hash.parse::<bcrypt::HashParts>() else {
                bail!(what(&format!(
                    "basic_auth_users: {user}'s password is not a bcrypt hash (make one with `htpasswd -nBC 10 \
                     {user}` or Python's bcrypt.hashpw)"
                )));
            };
            let cost = parts.get_cost();
            if !(4..=MAX_BCRYPT_COST).contains(&cost) {
                bail!(what(&format!(
                    "basic_auth_users: {user}'s bcrypt hash has cost {cost}: rtscope takes 4 to {MAX_BCRYPT_COST} \
                     (each step doubles a check's time; cost 31 takes days): make it again with `htpasswd -nBC 10 \
                     {user}`"
                )));
            }
        }
        Ok(WebConfig { tls, users: f.basic_auth_users })
    }
}

/// A TLS 1.2 and 1.3 server configuration (rustls' safe defaults, its
/// `ring` provider) of a PEM certificate chain and private key.
fn tls_config(cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert_pem).collect::<Result<_, _>>().map_err(|e| format!("{e:?}"))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| format!("{e:?}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> Result<WebConfig> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("web.yml");
        std::fs::write(&p, yaml).unwrap();
        WebConfig::load(&p)
    }

    #[test]
    fn basic_auth_hashes_are_parsed_and_their_cost_bounded() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let w = load(&format!("basic_auth_users:\n  prom: '{hash}'\n")).unwrap();
        assert_eq!(w.users.len(), 1);
        assert!(load("").unwrap().users.is_empty(), "an empty file asks for nothing");
        // Cost 31 would take days to check: refused at once, unhashed.
        let costly = hash.replacen("$04$", "$31$", 1);
        let t = std::time::Instant::now();
        let e = load(&format!("basic_auth_users:\n  prom: '{costly}'\n")).err().unwrap();
        assert!(format!("{e:#}").contains("cost 31") && format!("{e:#}").contains("4 to 12"), "{e:#}");
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_naming_it() {
        let e = |y: &str| load(y).err().map(|e| format!("{e:#}")).unwrap_or_default();
        assert!(e("nope: 1\n").contains("unknown field `nope`"));
        assert!(e("basic_auth_users:\n  u: plain\n").contains("not a bcrypt hash"));
        assert!(e("tls_server_config:\n  cert_file: c.pem\n").contains("both cert_file and key_file"));
        assert!(e("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n").contains("cert_file"));
        assert!(e("tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n").contains("client_auth_type"));
        assert!(e("tls_server_config:\n  min_version: TLS13\n").contains("min_version"));
        assert!(e("http_server_config:\n  headers:\n    X-A: b\n").contains("headers"));
        assert!(pem_blocks("-----BEGIN PRIVATE KEY-----\n!!!\n-----END PRIVATE KEY-----\n", "PRIVATE KEY").is_err());
        assert_eq!(pem_blocks("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "PRIVATE KEY"), Ok(1));
    }
}
