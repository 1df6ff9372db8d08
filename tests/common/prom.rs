//! The monitor and Prometheus, for the tests that run them (monitor.rs,
//! fleet.rs): a monitor process, a Prometheus server on 127.0.0.1 with a
//! temporary data directory, plain HTTP to both.

use super::BIN;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// An HTTP/1.0 request: (status, headers, body); None if nothing listens.
pub fn http(method: &str, port: u16, path: &str, accept: Option<&str>) -> Option<(u16, String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    write!(s, "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{accept}Connection: close\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, head.to_string(), body.to_string()))
}

/// A sample's value in a text-format page.
pub fn sample(page: &str, name_and_labels: &str) -> Option<f64> {
    page.lines().find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' ')?.parse().ok())
}

/// Where a program is on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// A running monitor, killed if the test ends early.
pub struct Monitor(pub Child);

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start_monitor(dir: &Path, db: &str, cpu: usize, port: u16, log: &str) -> Monitor {
    start_monitor_with(dir, db, cpu, port, log, &[])
}

/// [`start_monitor`] with `extra` flags.
pub fn start_monitor_with(dir: &Path, db: &str, cpu: usize, port: u16, log: &str, extra: &[&str]) -> Monitor {
    let log = std::fs::File::create(dir.join(log)).unwrap();
    let child = Command::new(BIN)
        .args(["monitor", "--cpus", &cpu.to_string(), "--checkpoint", "1s", "--db", db])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(extra)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Monitor(child)
}

/// Waits (at most 60 s) for the monitor's page to show `checkpoints`
/// committed intervals; returns the page.
pub fn wait_for_checkpoints(port: u16, checkpoints: f64) -> String {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((200, _, page)) = http("GET", port, "/metrics", None)
            && page
                .lines()
                .find(|l| l.starts_with("rtscope_checkpoints_total{"))
                .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .is_some_and(|n| n >= checkpoints)
        {
            return page;
        }
        assert!(Instant::now() < until, "the monitor served no {checkpoints} checkpoints in 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for `child` to end (at most 30 s); its exit code.
pub fn wait_exit(child: &mut Child) -> Option<i32> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        assert!(Instant::now() < until, "the process did not end in 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Prometheus server scraping 127.0.0.1:`target` every second; stopped
/// (and its data directory removed with the test's) when dropped.
pub struct Prometheus {
    pub child: Child,
    pub port: u16,
}

impl Prometheus {
    pub fn start(dir: &Path, target: u16, extra: &[&str]) -> Prometheus {
        Prometheus::start_with(dir, target, "", extra)
    }

    /// As [`Prometheus::start`], with `job` added to the scrape job's
    /// settings (YAML at its indentation).
    pub fn start_with(dir: &Path, target: u16, job: &str, extra: &[&str]) -> Prometheus {
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: rtscope\n    \
             static_configs:\n      - targets: ['127.0.0.1:{target}']\n{job}"
        );
        Prometheus::start_config(dir, &config, extra)
    }

    /// A Prometheus server with the configuration `config` (YAML).
    pub fn start_config(dir: &Path, config: &str, extra: &[&str]) -> Prometheus {
        let path = dir.join("prometheus.yml");
        std::fs::write(&path, config).unwrap();
        let config = path;
        let port = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Prometheus { child, port }
    }

    /// An instant query's answer, as Prometheus' HTTP API gives it (also
    /// for a query it refuses); Null while it does not answer.
    pub fn answer(&self, q: &str, at: Option<f64>) -> serde_json::Value {
        let mut path = format!("/api/v1/query?query={}", urlencode(q));
        if let Some(t) = at {
            path += &format!("&time={t}");
        }
        match http("GET", self.port, &path, None) {
            Some((_, _, body)) => serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
            None => serde_json::Value::Null,
        }
    }

    /// The JSON answer of the API's `path` (e.g. `/api/v1/alerts`); Null
    /// while it does not answer.
    pub fn answer_path(&self, path: &str) -> serde_json::Value {
        match http("GET", self.port, path, None) {
            Some((_, _, body)) => serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
            None => serde_json::Value::Null,
        }
    }

    /// An instant query's vector: (labels, timestamp, value) per series.
    pub fn query(&self, q: &str, at: Option<f64>) -> Vec<(serde_json::Value, f64, f64)> {
        let v = self.answer(q, at);
        if v["status"] != "success" {
            return vec![];
        }
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let ts = r["value"][0].as_f64().unwrap();
                let val: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
                (r["metric"].clone(), ts, val)
            })
            .collect()
    }
}

impl Prometheus {
    /// Waits (at most 90 s) until the target is up and Prometheus holds 5
    /// checkpoints of the series `labels`; returns that scrape's timestamp
    /// and its checkpoint count.
    pub fn wait_for_checkpoints(&self, dir: &Path, labels: &str) -> (f64, usize) {
        let until = Instant::now() + Duration::from_secs(90);
        loop {
            let up = self.query("up{job=\"rtscope\"}", None);
            let got = self.query(&format!("rtscope_checkpoints_total{{{labels}}}"), None);
            if let (Some((_, _, 1.0)), Some(&(_, ts, n))) = (up.first(), got.first())
                && n >= 5.0
            {
                return (ts, n as usize);
            }
            assert!(
                Instant::now() < until,
                "Prometheus got no 5 checkpoints in 90 s: up {up:?}, {got:?}; its log:\n{}",
                std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
