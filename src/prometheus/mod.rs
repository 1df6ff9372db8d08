//! Prometheus' HTTP API, read (the fleet report: `rtscope report
//! --prometheus`, `rtscope compare --prometheus`): a plain HTTP/1.1 GET
//! over a TCP stream (no TLS yet: `http://` URLs only), the queries that
//! bring a monitor's histograms, interval maxima and counters back per
//! step, and each machine (`instance`) made a run of kind `monitor`
//! (`rtscope_model::metrics::query`).

mod fleet;

pub use fleet::{Fleet, Machine, Window, fetch};

use anyhow::{Result, anyhow, bail};
use rtscope_model::metrics::query::{self, Labels, PromSeries};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The client's limits: connect and query timeouts, the largest answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    pub connect_ns: u64,
    pub query_ns: u64,
    pub max_answer: usize,
}

impl Default for ClientLimits {
    fn default() -> ClientLimits {
        ClientLimits { connect_ns: 5_000_000_000, query_ns: 30_000_000_000, max_answer: 256 << 20 }
    }
}

/// Where Prometheus answers: host, port and the path its API is under.
#[derive(Clone, Debug)]
pub struct Client {
    url: String,
    host: String,
    port: u16,
    prefix: String,
    limits: ClientLimits,
}

impl Client {
    /// A client of `url` (`http://HOST[:PORT][/PREFIX]`); the messages name `--prometheus`.
    pub fn new(url: &str, limits: ClientLimits) -> Result<Client> {
        let fix = "give the server's address, e.g. http://localhost:9090";
        if url.starts_with("https://") {
            bail!("--prometheus {url}: https is not supported yet (plain http only): {fix}, or a local proxy");
        }
        let rest =
            url.strip_prefix("http://").ok_or_else(|| anyhow!("--prometheus {url}: not an http:// URL: {fix}"))?;
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        if authority.contains('@') {
            bail!("--prometheus {url}: user and password in the URL are not supported yet");
        }
        // The port follows the last colon, unless that is inside an IPv6 literal's brackets.
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => {
                (h, p.parse::<u16>().map_err(|_| anyhow!("--prometheus {url}: '{p}' is not a port: {fix}"))?)
            }
            _ => (authority, 80),
        };
        if host.is_empty() {
            bail!("--prometheus {url}: no host: {fix}");
        }
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        let prefix = format!("/{}", path.trim_end_matches('/')).trim_end_matches('/').to_string();
        Ok(Client { url: url.to_string(), host, port, prefix, limits })
    }

    /// The answer to a GET of `path` (under the API prefix): its status and
    /// its body as it comes, or why not.
    fn open(&self, path: &str) -> Result<(u16, Body<'_, TcpStream>)> {
        let unreachable = |e: &dyn std::fmt::Display| {
            anyhow!("--prometheus {}: cannot reach the server: {e} (is Prometheus running there?)", self.url)
        };
        let addrs: Vec<_> = (self.host.as_str(), self.port).to_socket_addrs().map_err(|e| unreachable(&e))?.collect();
        let mut last = None;
        let mut stream = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, Duration::from_nanos(self.limits.connect_ns)) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let mut s = stream.ok_or_else(|| {
            let why = last.map_or("no address".to_string(), |e| e.to_string());
            anyhow!(
                "--prometheus {}: cannot reach the server: {why} (is Prometheus running there? --connect-timeout {} \
                 to wait longer)",
                self.url,
                rtscope_model::units::human(self.limits.connect_ns)
            )
        })?;
        let deadline = Instant::now() + Duration::from_nanos(self.limits.query_ns);
        s.set_write_timeout(Some(Duration::from_nanos(self.limits.query_ns)))?;
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        write!(
            s,
            "GET {}{path} HTTP/1.1\r\nHost: {host}:{}\r\nUser-Agent: rtscope/{}\r\nAccept: application/json\r\n\
             Connection: close\r\n\r\n",
            self.prefix,
            self.port,
            env!("CARGO_PKG_VERSION")
        )
        .map_err(|e| unreachable(&e))?;
        Body::open(self, path, s, deadline)
    }

    /// The whole body of a GET of `path`, or why not.
    fn get(&self, path: &str) -> Result<String> {
        let (status, mut body) = self.open(path)?;
        let text = body.text()?;
        // The API answers errors with a JSON body too (400, 422, 503): the caller reads it.
        if status != 200 && !text.trim_start().starts_with('{') {
            let start: String = text.chars().take(200).collect();
            bail!("--prometheus {}: HTTP {status} for {}{path}: {start}", self.url, self.prefix);
        }
        Ok(text)
    }

    /// The series of a query's answer at `path`, read as it comes.
    fn answer(&self, path: &str, q: &str) -> Result<Vec<PromSeries>> {
        let (status, mut body) = self.open(path)?;
        if status != 200 {
            // An error: a short JSON body, or another server's page.
            let text = body.text()?;
            if !text.trim_start().starts_with('{') {
                let start: String = text.chars().take(200).collect();
                bail!("--prometheus {}: HTTP {status} for {}{path}: {start}", self.url, self.prefix);
            }
            return query::parse_answer(&text).map_err(|e| anyhow!("{e} (query {q})"));
        }
        match query::read_answer(&mut body) {
            Ok(s) => Ok(s),
            Err(e) => Err(body.failed.take().unwrap_or_else(|| anyhow!("{} (query {q})", query::answer_error(&e, "")))),
        }
    }

    /// The series of an instant query at `at` (Unix seconds).
    pub fn query(&self, q: &str, at: f64) -> Result<Vec<PromSeries>> {
        self.answer(&format!("/api/v1/query?query={}&time={at:.3}", encode(q)), q)
    }

    /// The series of a range query from `start` to `end` every `step` seconds.
    pub fn query_range(&self, q: &str, start: f64, end: f64, step: f64) -> Result<Vec<PromSeries>> {
        let path = format!("/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step={step:.3}", encode(q));
        self.answer(&path, q)
    }

    /// The label sets of the series `matcher` selects between `start` and `end`.
    pub fn series(&self, matcher: &str, start: f64, end: f64) -> Result<Vec<Labels>> {
        let body = self.get(&format!("/api/v1/series?match[]={}&start={start:.3}&end={end:.3}", encode(matcher)))?;
        query::parse_series(&body).map_err(|e| anyhow!("{e} (series {matcher})"))
    }
}

impl Client {
    /// The values of `label` on the series any of `matchers` selects between `start` and `end`.
    pub fn label_values(&self, label: &str, matchers: &[String], start: f64, end: f64) -> Result<Vec<String>> {
        let picks: String = matchers.iter().map(|m| format!("&match[]={}", encode(m))).collect();
        let path = format!("/api/v1/label/{}/values?start={start:.3}&end={end:.3}{picks}", encode(label));
        query::parse_label_values(&self.get(&path)?).map_err(|e| anyhow!("{e} (label values of {label})"))
    }
}

/// A stream whose reads can be given a time limit.
trait Timed: Read {
    fn limit(&mut self, d: Duration) -> std::io::Result<()>;
}

impl Timed for TcpStream {
    fn limit(&mut self, d: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(d.max(Duration::from_millis(1))))
    }
}

impl Timed for &[u8] {
    fn limit(&mut self, _: Duration) -> std::io::Result<()> {
        Ok(())
    }
}

/// An HTTP/1.x answer's body as it arrives (identity or chunked), within
/// the query's deadline and at most `--max-answer` bytes: a server that
/// trickles, never ends or sends without end is given up on, naming the
/// flag to change. A reader of it sees an I/O error; the message to give
/// is in `failed`.
struct Body<'a, R: Timed> {
    client: &'a Client,
    path: String,
    inner: BufReader<R>,
    deadline: Instant,
    chunked: bool,
    /// Bytes left in the chunk being read.
    in_chunk: usize,
    done: bool,
    taken: usize,
    failed: Option<anyhow::Error>,
}

impl<'a, R: Timed> Body<'a, R> {
    /// Reads the status line and the headers from `stream`.
    fn open(client: &'a Client, path: &str, stream: R, deadline: Instant) -> Result<(u16, Body<'a, R>)> {
        let mut b = Body {
            client,
            path: path.to_string(),
            inner: BufReader::with_capacity(64 << 10, stream),
            deadline,
            chunked: false,
            in_chunk: 0,
            done: false,
            taken: 0,
            failed: None,
        };
        let not_http = || anyhow!("--prometheus {}: the server's answer is not HTTP", client.url);
        let status_line = b.line().map_err(|_| b.failed.take().unwrap_or_else(not_http))?;
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .filter(|_| status_line.starts_with("HTTP/"))
            .ok_or_else(not_http)?;
        for _ in 0..200 {
            let l = b.line().map_err(|_| b.failed.take().unwrap_or_else(not_http))?;
            if l.is_empty() {
                return Ok((status, b));
            }
            if let Some((k, v)) = l.split_once(':')
                && k.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
            {
                b.chunked = true;
            }
        }
        Err(not_http())
    }

    /// Keeps `e` as the reason and hands the reader an I/O error.
    fn fail(&mut self, e: anyhow::Error) -> std::io::Error {
        let io = std::io::Error::other(e.to_string());
        self.failed = Some(e);
        io
    }

    fn late(&mut self) -> std::io::Error {
        let c = self.client;
        let e = anyhow!(
            "--prometheus {}: no whole answer to {}{} within {} (--query-timeout; a range of many series can \
             take longer: give it more, or a shorter --range or longer --step)",
            c.url,
            c.prefix,
            self.path,
            rtscope_model::units::human(c.limits.query_ns)
        );
        self.fail(e)
    }

    /// `f` of the stream within what is left of the deadline.
    fn timed<T>(&mut self, f: impl FnOnce(&mut BufReader<R>) -> std::io::Result<T>) -> std::io::Result<T> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.late());
        }
        self.inner.get_mut().limit(left)?;
        match f(&mut self.inner) {
            Ok(t) => Ok(t),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                Err(self.late())
            }
            Err(e) => {
                let c = self.client;
                let m = anyhow!(
                    "--prometheus {}: the answer to {}{} broke off: {e} (is Prometheus running there?)",
                    c.url,
                    c.prefix,
                    self.path
                );
                Err(self.fail(m))
            }
        }
    }

    /// A line of the head or a chunk's size line, without its CRLF.
    fn line(&mut self) -> std::io::Result<String> {
        let mut l = Vec::new();
        self.timed(|r| r.by_ref().take(8192).read_until(b'\n', &mut l))?;
        if !l.ends_with(b"\n") {
            let c = self.client;
            return Err(self.fail(anyhow!(
                "--prometheus {}: the answer to {}{} ends early",
                c.url,
                c.prefix,
                self.path
            )));
        }
        Ok(String::from_utf8_lossy(&l).trim_end_matches(['\r', '\n']).to_string())
    }

    /// The whole body as text.
    fn text(&mut self) -> Result<String> {
        let mut raw = Vec::new();
        match self.read_to_end(&mut raw) {
            Ok(_) => Ok(String::from_utf8_lossy(&raw).into_owned()),
            Err(e) => Err(self.failed.take().unwrap_or_else(|| anyhow!("{e}"))),
        }
    }
}

impl<R: Timed> Read for Body<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        let n = if self.chunked {
            if self.in_chunk == 0 {
                let l = self.line()?;
                let size = usize::from_str_radix(l.split(';').next().unwrap_or("").trim(), 16);
                let Ok(size) = size else {
                    let c = self.client;
                    return Err(self.fail(anyhow!("--prometheus {}: a chunked body with a bad chunk size", c.url)));
                };
                if size == 0 {
                    self.done = true;
                    return Ok(0);
                }
                self.in_chunk = size;
            }
            let want = buf.len().min(self.in_chunk);
            let n = self.timed(|r| r.read(&mut buf[..want]))?;
            if n == 0 {
                let c = self.client;
                return Err(self.fail(anyhow!("--prometheus {}: a chunked body ends early", c.url)));
            }
            self.in_chunk -= n;
            if self.in_chunk == 0 {
                // The chunk's CRLF.
                self.line()?;
            }
            n
        } else {
            let n = self.timed(|r| r.read(buf))?;
            self.done = n == 0;
            n
        };
        self.taken += n;
        let c = self.client;
        if self.taken > c.limits.max_answer {
            let e = anyhow!(
                "--prometheus {}: the answer to {}{} is larger than {} (--max-answer): give a larger \
                 --max-answer, or a shorter --range, a longer --step or a narrower --selector",
                c.url,
                c.prefix,
                self.path,
                crate::sys::mem::human_bytes(c.limits.max_answer as u64)
            );
            return Err(self.fail(e));
        }
        Ok(n)
    }
}

/// Percent-encoding of a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Client {
        fn new_default(url: &str) -> Result<Client> {
            Client::new(url, ClientLimits::default())
        }
    }

    #[test]
    fn urls_are_read_or_refused_naming_the_flag() {
        let c = Client::new_default("http://prom.example:9091/prefix/").unwrap();
        assert_eq!((c.host.as_str(), c.port, c.prefix.as_str()), ("prom.example", 9091, "/prefix"));
        let c = Client::new_default("http://localhost").unwrap();
        assert_eq!((c.port, c.prefix.as_str()), (80, ""));
        let c = Client::new_default("http://[::1]:9090").unwrap();
        assert_eq!((c.host.as_str(), c.port), ("::1", 9090));
        let c = Client::new_default("http://[::1]/p").unwrap();
        assert_eq!((c.host.as_str(), c.port, c.prefix.as_str()), ("::1", 80, "/p"));
        for bad in ["https://x:9090", "localhost:9090", "http://:9090", "http://x:port", "http://u:p@x:9090"] {
            let e = Client::new_default(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--prometheus {bad}")), "{e}");
        }
    }

    fn parse_response(raw: &[u8]) -> Result<(u16, String)> {
        let c = Client::new_default("http://prom.example:9090")?;
        let (status, mut body) = Body::open(&c, "/p", raw, Instant::now() + Duration::from_secs(5))?;
        Ok((status, body.text()?))
    }

    #[test]
    fn responses_are_read_plain_or_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}";
        assert_eq!(parse_response(plain).unwrap(), (200, "{\"a\":1}".to_string()));
        let chunked =
            b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;x=y\r\n:1}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), (400, "{\"a\":1}".to_string()));
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert_eq!(encode("a{b=\"c d\"}[5m]"), "a%7Bb%3D%22c%20d%22%7D%5B5m%5D");
    }

    /// A server that never answers, one that trickles an answer for ever
    /// and one that sends without end are given up on within the query
    /// timeout and the answer limit, naming the flag to change; before,
    /// the client waited for the server to close and read 12 GB.
    #[test]
    fn a_server_that_never_ends_is_given_up_on_naming_the_flag() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let server = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for (i, s) in listener.incoming().enumerate() {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let mut s = s.unwrap();
                    match i {
                        // Silent.
                        0 => held.push(s),
                        // A byte every 50 ms.
                        1 => std::thread::spawn(move || {
                            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
                            while s.write_all(b" ").is_ok() {
                                std::thread::sleep(Duration::from_millis(50));
                            }
                        })
                        .join()
                        .unwrap_or(()),
                        // Without end, as fast as it goes.
                        _ => {
                            std::thread::spawn(move || {
                                // An answer read as it comes: one that parses, without end.
                                let _ = s.write_all(
                                    b"HTTP/1.1 200 OK\r\n\r\n{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[",
                                );
                                let chunk = b"{\"metric\":{},\"values\":[]},".repeat(2500);
                                while s.write_all(&chunk).is_ok() {}
                            });
                        }
                    }
                }
            })
        };
        let limits = ClientLimits { connect_ns: 1_000_000_000, query_ns: 700_000_000, max_answer: 1 << 20 };
        let c = Client::new(&format!("http://127.0.0.1:{port}"), limits).unwrap();
        let t = Instant::now();
        let e = c.query("up", 0.0).unwrap_err().to_string();
        assert!(e.contains("--query-timeout") && e.contains("700ms"), "{e}");
        let e = c.query("up", 0.0).unwrap_err().to_string();
        assert!(e.contains("--query-timeout"), "a trickle: {e}");
        let e = c.query("up", 0.0).unwrap_err().to_string();
        assert!(e.contains("--max-answer") && e.contains("1 MiB"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = std::net::TcpStream::connect(("127.0.0.1", port));
        server.join().unwrap();
    }

    #[test]
    fn an_unreachable_server_is_named() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let c = Client::new_default(&format!("http://127.0.0.1:{port}")).unwrap();
        let e = c.query("up", 0.0).unwrap_err().to_string();
        assert!(e.contains("--prometheus http://127.0.0.1:") && e.contains("cannot reach"), "{e}");
    }
}
