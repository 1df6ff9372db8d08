//! Prometheus' HTTP API, read (the fleet report: `rtscope report
//! --prometheus`, `rtscope compare --prometheus`): a plain HTTP/1.1 GET
//! over a TCP stream (no TLS yet: `http://` URLs only), the queries that
//! bring a monitor's histograms, interval maxima and counters back per
//! step, and each machine (`instance`) made a run of kind `monitor`
//! (`rtscope_model::metrics::query`).

use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::metrics::names;
use rtscope_model::metrics::query::{self, Bucket, Labels, PromSeries, Step};
use rtscope_model::run::{Run, SeriesKey};
use std::collections::BTreeMap;
use std::io::{Read, Write};
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

    /// The body of a GET of `path` (under the API prefix), or why not.
    fn get(&self, path: &str) -> Result<String> {
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
        let timeout = Duration::from_nanos(self.limits.query_ns);
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
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
        let raw = self.read_answer(&mut s, deadline, path)?;
        let (status, body) = parse_response(&raw).map_err(|e| anyhow!("--prometheus {}: {e}", self.url))?;
        // The API answers errors with a JSON body too (400, 422, 503): the caller reads it.
        if status != 200 && !body.trim_start().starts_with('{') {
            let start: String = body.chars().take(200).collect();
            bail!("--prometheus {}: HTTP {status} for {}{path}: {start}", self.url, self.prefix);
        }
        Ok(body)
    }

    /// The whole answer on `s`, by `deadline` and at most
    /// `--max-answer` bytes: a server that trickles, never ends or sends
    /// without end is given up on, naming the flag to change.
    fn read_answer(&self, s: &mut TcpStream, deadline: Instant, path: &str) -> Result<Vec<u8>> {
        let human = rtscope_model::units::human;
        let late = || {
            anyhow!(
                "--prometheus {}: no whole answer to {}{path} within {} (--query-timeout; a range of many series can \
                 take longer: give it more, or a shorter --range or longer --step)",
                self.url,
                self.prefix,
                human(self.limits.query_ns)
            )
        };
        let mut raw = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(late());
            }
            s.set_read_timeout(Some(left))?;
            match s.read(&mut buf) {
                Ok(0) => return Ok(raw),
                Ok(n) => {
                    if raw.len() + n > self.limits.max_answer {
                        bail!(
                            "--prometheus {}: the answer to {}{path} is larger than {} (--max-answer): give a larger \
                             --max-answer, or a shorter --range, a longer --step or a narrower --selector",
                            self.url,
                            self.prefix,
                            crate::sys::mem::human_bytes(self.limits.max_answer as u64)
                        );
                    }
                    raw.try_reserve(n).map_err(|e| anyhow!("--prometheus {}: {e}", self.url))?;
                    raw.extend_from_slice(&buf[..n]);
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    return Err(late());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(anyhow!(
                        "--prometheus {}: the answer to {}{path} broke off: {e} (is Prometheus running there?)",
                        self.url,
                        self.prefix
                    ));
                }
            }
        }
    }

    /// The series of an instant query at `at` (Unix seconds).
    pub fn query(&self, q: &str, at: f64) -> Result<Vec<PromSeries>> {
        let body = self.get(&format!("/api/v1/query?query={}&time={at:.3}", encode(q)))?;
        query::parse_answer(&body).map_err(|e| anyhow!("{e} (query {q})"))
    }

    /// The series of a range query from `start` to `end` every `step` seconds.
    pub fn query_range(&self, q: &str, start: f64, end: f64, step: f64) -> Result<Vec<PromSeries>> {
        let path = format!("/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step={step:.3}", encode(q));
        let body = self.get(&path)?;
        query::parse_answer(&body).map_err(|e| anyhow!("{e} (query {q})"))
    }

    /// The label sets of the series `matcher` selects between `start` and `end`.
    pub fn series(&self, matcher: &str, start: f64, end: f64) -> Result<Vec<Labels>> {
        let body = self.get(&format!("/api/v1/series?match[]={}&start={start:.3}&end={end:.3}", encode(matcher)))?;
        query::parse_series(&body).map_err(|e| anyhow!("{e} (series {matcher})"))
    }
}

/// An HTTP/1.x response's status and body (identity or chunked).
fn parse_response(raw: &[u8]) -> Result<(u16, String), String> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("the server's answer is not HTTP")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .filter(|_| head.starts_with("HTTP/"))
        .ok_or("the server's answer is not HTTP")?;
    let mut body = &raw[split + 4..];
    let chunked = head.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked")
        })
    });
    if !chunked {
        return Ok((status, String::from_utf8_lossy(body).into_owned()));
    }
    let mut out = Vec::new();
    loop {
        let eol = body.windows(2).position(|w| w == b"\r\n").ok_or("a chunked body ends early")?;
        let size_text = String::from_utf8_lossy(&body[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "a chunked body with a bad chunk size")?;
        body = &body[eol + 2..];
        if size == 0 {
            break;
        }
        if body.len() < size {
            return Err("a chunked body ends early".into());
        }
        out.extend_from_slice(&body[..size]);
        body = body.get(size + 2..).unwrap_or_default();
    }
    Ok((status, String::from_utf8_lossy(&out).into_owned()))
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

/// The time span read: `[start_s, end_s]` (Unix seconds) in steps of `step_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub start_s: f64,
    pub end_s: f64,
    pub step_s: f64,
}

impl Window {
    /// The ends of the steps, each the end of a step of `step_s` seconds.
    fn first_end(&self) -> f64 {
        (self.start_s + self.step_s).min(self.end_s)
    }
}

/// What the fleet's data is, as read from Prometheus.
pub struct Fleet {
    /// One run per machine (`instance`), in the order of their names.
    pub runs: Vec<Run>,
    /// The machines' series whose histograms were native (the others' classic).
    pub native: usize,
    pub classic: usize,
    /// Interval maxima scraped, and checkpoint intervals committed, in the window (all machines).
    pub maxima_scraped: u64,
    pub checkpoints: u64,
}

fn step_key(t: f64) -> i64 {
    (t * 1000.0).round() as i64
}

/// Per (machine, series), per step end: `f` of the values.
type PerStep<T> = BTreeMap<(String, SeriesKey), BTreeMap<i64, T>>;

/// The values of `series` per machine, key and step.
fn per_step(series: &[PromSeries]) -> PerStep<f64> {
    let mut out: PerStep<f64> = BTreeMap::new();
    for s in series {
        if let Some(k) = query::key_of(&s.labels) {
            let m = out.entry(k).or_default();
            for &(t, v) in &s.values {
                if v.is_finite() {
                    *m.entry(step_key(t)).or_default() += v;
                }
            }
        }
    }
    out
}

/// Reads the monitors' series that `matchers` (a selector's inside) picks in `w` from Prometheus.
pub fn fetch(c: &Client, selector: &str, matchers: &str, w: &Window) -> Result<Fleet> {
    let name = |n: &str| query::with_name(n, matchers);
    let span = rtscope_model::units::human((w.end_s - w.start_s).max(0.0) as u64 * 1_000_000_000);
    let at = rtscope_model::units::utc((w.end_s * 1e9) as i64);
    let found = monitors(c, selector, matchers, w, (&span, &at))?;
    let (first, step) = (w.first_end(), w.step_s);
    let range = |q: String| -> Result<Vec<PromSeries>> {
        c.query_range(&q, first, w.end_s, step).with_context(|| format!("reading {span} up to {at}"))
    };
    let s = format!("{}s", step.round() as u64);
    let classic = range(format!("increase({}[{s}])", name(&names::bucket(names::LATENCY))))?;
    let native = range(format!("increase({}[{s}])", name(names::LATENCY)))?;
    let maxima = range(format!("max_over_time({}[{s}])", name(names::INTERVAL_MAX)))?;
    let scraped = range(format!("count_over_time({}[{s}])", name(names::INTERVAL_MAX)))?;
    let checkpoints = range(format!("increase({}[{s}])", name(&names::total(names::CHECKPOINTS))))?;
    let (buckets, n_native, n_classic) = histograms(&classic, &native);
    let counters = Counters {
        maxima: per_step(&maxima),
        missed: per_step(&range(format!("increase({}[{s}])", name(&names::total(names::MISSED_PERIODS))))?),
        lost: per_step(&range(format!("increase({}[{s}])", name(&names::total(names::LOST_EXCEEDANCES))))?),
    };
    let count = |m: &PerStep<f64>| -> u64 { m.values().flat_map(|s| s.values()).map(|v| v.round() as u64).sum() };
    let mut machines = series_per_machine(buckets, &counters, step)?;
    for l in &found {
        machines.entry(l.get("instance").cloned().unwrap_or_default()).or_default();
    }
    let plan = serde_json::json!({
        "source": "prometheus",
        "url": c.url,
        "selector": selector,
        "start_unix_s": w.start_s,
        "end_unix_s": w.end_s,
        "step_s": step,
    });
    let runs = machines
        .into_iter()
        .map(|(inst, series)| query::machine_run(&inst, w.start_s, w.end_s, series, plan.clone()))
        .collect();
    Ok(Fleet {
        runs,
        native: n_native,
        classic: n_classic,
        maxima_scraped: count(&per_step(&scraped)),
        checkpoints: count(&per_step(&checkpoints)),
    })
}

/// The monitors' series in the window (their checkpoint counters), or an
/// error saying what the selector picks instead.
fn monitors(
    c: &Client,
    selector: &str,
    matchers: &str,
    w: &Window,
    (span, at): (&str, &str),
) -> Result<Vec<query::Labels>> {
    let name = |n: &str| query::with_name(n, matchers);
    let found = c.series(&name(&names::total(names::CHECKPOINTS)), w.start_s, w.end_s)?;
    if found.is_empty() {
        let any = c.series(&name("up"), w.start_s, w.end_s).unwrap_or_default();
        let hint = if any.is_empty() {
            "it selects no series at all there".to_string()
        } else {
            format!("it selects {} targets' `up`, but no rtscope monitor's series", any.len())
        };
        bail!(
            "--selector {selector}: no rtscope monitor in Prometheus in the {span} up to {at}: {hint}; check the \
             selector (e.g. '{{job=\"rtscope\"}}') and --range"
        );
    }
    Ok(found)
}

/// Per machine and series, per step: the buckets, native where a series
/// has them, else classic; and how many series were of each.
fn histograms(classic: &[PromSeries], native: &[PromSeries]) -> (PerStep<Vec<Bucket>>, usize, usize) {
    let mut buckets: PerStep<Vec<Bucket>> = BTreeMap::new();
    let mut les: PerStep<Vec<(f64, f64)>> = BTreeMap::new();
    for ser in classic {
        let (Some(k), Some(le)) = (query::key_of(&ser.labels), ser.labels.get("le")) else { continue };
        let Ok(le) = le.parse::<f64>().or_else(|_| if le == "+Inf" { Ok(f64::INFINITY) } else { Err(()) }) else {
            continue;
        };
        let m = les.entry(k).or_default();
        for &(t, v) in &ser.values {
            m.entry(step_key(t)).or_default().push((le, v));
        }
    }
    let mut n_classic = 0;
    for (k, steps) in les {
        n_classic += 1;
        buckets.insert(k, steps.into_iter().map(|(t, c)| (t, query::classic_buckets(&c))).collect());
    }
    let mut n_native = 0;
    for ser in native {
        let Some(k) = query::key_of(&ser.labels) else { continue };
        if ser.histograms.is_empty() {
            continue;
        }
        n_native += 1;
        if buckets.remove(&k).is_some() {
            n_classic -= 1;
        }
        buckets.insert(k, ser.histograms.iter().map(|(t, h)| (step_key(*t), query::native_buckets(h))).collect());
    }
    (buckets, n_native, n_classic)
}

/// The per-step counters beside the histograms.
struct Counters {
    maxima: PerStep<f64>,
    missed: PerStep<f64>,
    lost: PerStep<f64>,
}

/// Each machine's series rebuilt from its steps: the histograms, the
/// interval maxima, the missed periods and lost exceedances of each step
/// that measured something.
fn series_per_machine(
    buckets: PerStep<Vec<Bucket>>,
    counters: &Counters,
    step: f64,
) -> Result<BTreeMap<String, Vec<rtscope_model::run::Series>>> {
    let mut machines: BTreeMap<String, Vec<rtscope_model::run::Series>> = BTreeMap::new();
    for ((instance, key), steps) in buckets {
        let k = (instance, key);
        let at_step = |m: &PerStep<f64>, t: i64| m.get(&k).and_then(|s| s.get(&t)).copied();
        let list: Vec<(Step, u64, u64)> = steps
            .into_iter()
            .map(|(t, b)| {
                let max_ns = at_step(&counters.maxima, t).map(|v| (v * 1e9).round() as i64);
                let n = |m: &PerStep<f64>| at_step(m, t).map_or(0, |v| v.max(0.0).round() as u64);
                (Step { end_s: t as f64 / 1000.0, buckets: b, max_ns }, n(&counters.missed), n(&counters.lost))
            })
            .collect();
        let plain: Vec<Step> = list.iter().map(|(s, _, _)| s.clone()).collect();
        let mut series =
            query::series_of(k.1.clone(), &plain, step).map_err(|e| anyhow!("{} of {}: {e}", k.1.describe(), k.0))?;
        let counted: Vec<(u64, u64)> =
            list.iter().filter(|(s, _, _)| s.buckets.iter().any(|b| b.count > 0)).map(|(_, m, l)| (*m, *l)).collect();
        for (iv, (m, l)) in series.intervals.iter_mut().zip(counted) {
            (iv.overruns, iv.lost_exceedances) = (m, l);
        }
        machines.entry(k.0).or_default().push(series);
    }
    Ok(machines)
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
                                let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
                                let chunk = vec![b'x'; 64 << 10];
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
