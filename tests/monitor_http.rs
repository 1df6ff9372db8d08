//! The monitor's HTTP edge under hostile requests (plain, basic auth,
//! TLS): a correct scrape is answered every second while a bounded loop
//! sends what a server on a network gets. Root only, as the monitor
//! measures.

mod common;
use common::prom::*;
use common::*;
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

/// How the hostile test reaches the monitor: plain, with basic auth, or
/// with TLS and basic auth.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Edge {
    Plain,
    Auth,
    TlsAuth,
}

/// A connection to the monitor, through TLS (trusting `ca`) or not.
fn connect(port: u16, tls: Option<&std::sync::Arc<rustls::ClientConfig>>) -> Option<Box<dyn ReadWrite>> {
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    tcp.set_write_timeout(Some(Duration::from_secs(3))).ok()?;
    Some(match tls {
        None => Box::new(tcp),
        Some(cfg) => {
            let name = rustls::pki_types::ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
            let conn = rustls::ClientConnection::new(cfg.clone(), name).ok()?;
            Box::new(rustls::StreamOwned::new(conn, tcp))
        }
    })
}

trait ReadWrite: std::io::Read + Write {}
impl<T: std::io::Read + Write> ReadWrite for T {}

/// Sends `raw` and reads the answer (to its end or 3 s).
fn exchange(port: u16, tls: Option<&std::sync::Arc<rustls::ClientConfig>>, raw: &[u8]) -> String {
    let Some(mut c) = connect(port, tls) else { return String::new() };
    let _ = c.write_all(raw);
    let _ = c.flush();
    let mut out = Vec::new();
    let _ = std::io::Read::read_to_end(&mut c, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// One hostile request of kind `k`, random where it can be.
fn attack(k: u32, port: u16, tls: Option<&std::sync::Arc<rustls::ClientConfig>>, rng: &mut fastrand::Rng) {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    match k {
        0 => {
            exchange(port, tls, b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\nabc");
        }
        1 => {
            let mut raw = b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for _ in 0..50 {
                raw.extend_from_slice(b"fffffff\r\n");
                raw.extend(std::iter::repeat_n(b'a', 1000));
            }
            exchange(port, tls, &raw);
        }
        2 => {
            let many: String = (0..10_000).map(|i| format!("X-{i}: {}\r\n", rng.u32(..))).collect();
            exchange(port, tls, format!("GET /metrics HTTP/1.1\r\n{many}\r\n").as_bytes());
        }
        3 => {
            // A slow client: a byte every 100 ms for two seconds.
            if let Some(mut c) = connect(port, tls) {
                for b in b"GET /metrics HTTP/1.1\r\nX-Slow: 12345678901234" {
                    if c.write_all(&[*b]).and_then(|_| c.flush()).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        4 => {
            let pw: String = (0..rng.usize(1..40)).map(|_| rng.alphanumeric()).collect();
            let user = if rng.bool() { "prom" } else { "mallory" };
            let raw = format!("GET /metrics HTTP/1.1\r\nAuthorization: Basic {}\r\n\r\n", b64(&format!("{user}:{pw}")));
            exchange(port, tls, raw.as_bytes());
        }
        5 => {
            let junk: Vec<u8> = (0..rng.usize(1..20_000)).map(|_| rng.u8(..)).collect();
            exchange(port, tls, &junk);
        }
        6 => {
            // Plain bytes to a TLS port, or a TLS hello to a plain one.
            let tcp = std::net::TcpStream::connect(("127.0.0.1", port));
            if let Ok(mut t) = tcp {
                let _ = t.set_read_timeout(Some(Duration::from_secs(2)));
                let _ =
                    t.write_all(if tls.is_some() { b"GET / HTTP/1.1\r\n\r\n" } else { b"\x16\x03\x01\x02\x00\x01" });
                let _ = std::io::Read::read_to_end(&mut t, &mut Vec::new());
            }
        }
        7 => {
            // Many connections opened and left idle a moment.
            let held: Vec<_> = (0..60).filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok()).collect();
            std::thread::sleep(Duration::from_millis(500));
            drop(held);
        }
        _ => {
            let path: String = (0..rng.usize(1..5000)).map(|_| rng.alphanumeric()).collect();
            let method = ["GET", "PUT", "DELETE", "OPTIONS", "get", "G\0T"][rng.usize(..6)];
            exchange(port, tls, format!("{method} /{path} HTTP/1.{}\r\n\r\n", rng.u8(0..3)).as_bytes());
        }
    }
}

/// The monitor's HTTP edge under a bounded loop of random and hostile
/// requests on 127.0.0.1 (huge Content-Length, chunked bodies, 10,000
/// header fields, slow clients, garbage, wrong passwords in parallel,
/// crowds of idle connections), plain, with basic auth and with TLS and
/// basic auth: meanwhile a correct scrape every second is answered within
/// 1 s, and the monitor keeps measuring (its sample count grows). Before,
/// the first huge Content-Length aborted it, and 200 wrong passwords kept
/// a correct scrape waiting 11 s.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn the_http_edge_holds_under_hostile_requests() {
    let fx = Fixture::root();
    let dir = &fx.dir;
    // A CA and a server certificate it signed (rustls takes no CA
    // certificate as a server's own).
    let tls_files = has("openssl", which("openssl").is_some()) && {
        std::fs::write(dir.join("leaf.ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n").unwrap();
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        for args in [
            &["req", "-x509", "-days", "1", "-subj", "/CN=rtscope test CA", "-keyout", "ca.key", "-out", "ca.pem"][..],
            &["req", "-subj", "/CN=127.0.0.1", "-keyout", "key.pem", "-out", "leaf.csr"],
            &["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1"],
        ] {
            let mut c = Command::new("openssl");
            c.args(args).current_dir(&**dir);
            if args[0] == "req" {
                c.args(ec);
            } else {
                c.args(["-extfile", "leaf.ext", "-out", "cert.pem"]);
            }
            let o = c.output().unwrap();
            assert!(o.status.success(), "openssl {args:?}: {}", text(&o));
        }
        true
    };
    let hash = bcrypt::hash("s3cret", 8).unwrap();
    let cpu = last_cpu();
    for edge in [Edge::Plain, Edge::Auth, Edge::TlsAuth] {
        if edge == Edge::TlsAuth && !tls_files {
            continue;
        }
        let db = dir.join(format!("{edge:?}.db"));
        let web = dir.join(format!("{edge:?}.yml"));
        let mut yaml = String::new();
        if edge == Edge::TlsAuth {
            yaml.push_str("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n");
        }
        if edge != Edge::Plain {
            yaml.push_str(&format!("basic_auth_users:\n  prom: '{hash}'\n"));
        }
        std::fs::write(&web, yaml).unwrap();
        let port = free_port();
        let log = dir.join(format!("{edge:?}.log"));
        let mut mon = start_monitor_with(
            dir,
            db.to_str().unwrap(),
            cpu,
            port,
            log.file_name().unwrap().to_str().unwrap(),
            &["--web-config", web.to_str().unwrap()],
        );
        let tls = (edge == Edge::TlsAuth).then(|| {
            let mut roots = rustls::RootCertStore::empty();
            use rustls::pki_types::pem::PemObject;
            for c in rustls::pki_types::CertificateDer::pem_file_iter(dir.join("ca.pem")).unwrap() {
                roots.add(c.unwrap()).unwrap();
            }
            let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
            std::sync::Arc::new(
                rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            )
        });
        let auth = if edge == Edge::Plain {
            String::new()
        } else {
            use base64::Engine;
            format!("Authorization: Basic {}\r\n", base64::engine::general_purpose::STANDARD.encode("prom:s3cret"))
        };
        let scrape = || -> (Duration, Option<f64>) {
            let t = Instant::now();
            let page = exchange(port, tls.as_ref(), format!("GET /metrics HTTP/1.0\r\n{auth}\r\n").as_bytes());
            let count = page
                .starts_with("HTTP/1.1 200")
                .then(|| page.lines().find(|l| l.starts_with("rtscope_latency_seconds_count{")))
                .flatten()
                .and_then(|l| l.rsplit(' ').next()?.parse().ok());
            (t.elapsed(), count)
        };
        // Up and counting (the credential's first check is made here).
        let until = Instant::now() + Duration::from_secs(60);
        let first = loop {
            if let (_, Some(n)) = scrape()
                && n > 0.0
            {
                break n;
            }
            assert!(Instant::now() < until, "{edge:?}: no page in 60 s: {}", std::fs::read_to_string(&log).unwrap());
            std::thread::sleep(Duration::from_millis(200));
        };
        let stop = std::sync::atomic::AtomicBool::new(false);
        let mut counts = vec![first];
        std::thread::scope(|s| {
            for worker in 0..4u64 {
                let (stop, tls) = (&stop, tls.as_ref());
                s.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(37 + worker);
                    let mut k = worker as u32;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        // Every kind in turn, then at random.
                        let kind = if k < 9 { k } else { rng.u32(0..9) };
                        attack(kind, port, tls, &mut rng);
                        k += 4;
                    }
                });
            }
            for second in 0..5 {
                std::thread::sleep(Duration::from_secs(1));
                let (took, count) = scrape();
                assert!(
                    took < Duration::from_secs(1) && count.is_some(),
                    "{edge:?}: the scrape of second {second} took {took:?} (got {count:?})"
                );
                counts.extend(count);
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        assert!(
            mon.0.try_wait().unwrap().is_none(),
            "{edge:?}: the monitor ended: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        assert!(counts.last() > counts.first(), "{edge:?}: the sample count did not grow: {counts:?}");
        signal(mon.0.id(), libc::SIGINT);
        assert_eq!(wait_exit(&mut mon.0), Some(0), "{}", std::fs::read_to_string(&log).unwrap());
    }
}
