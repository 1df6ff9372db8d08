//! The monitor's HTTP edge: a small HTTP/1.1 server of its own, for a
//! server on a network that only answers scrapes. One thread polls every
//! connection (non-blocking sockets, `poll(2)`), so no client, slow or
//! hostile, holds it; a second one checks passwords ([`auth`]). Both are
//! started from the monitor's housekeeping thread and so stay off the
//! measured CPUs.
//!
//! Bounded everywhere:
//! - a request's head is at most [`request::MAX_HEAD`] bytes,
//!   [`request::MAX_HEADERS`] fields and a [`request::MAX_URL`] target;
//!   a body is refused (413, never read, nothing allocated from its
//!   length), as is `Transfer-Encoding`;
//! - at most [`MAX_CONNECTIONS`] connections: at the limit the one that
//!   has waited longest without a whole request is closed for the new one;
//! - [`HEAD_TIMEOUT`] to send a whole head (TLS handshake included),
//!   [`IDLE_TIMEOUT`] between requests, [`WRITE_TIMEOUT`] to take an answer;
//! - with basic auth, a credential's first check is queued to the
//!   verifier (bounded, [`auth`]), later ones answered from its cache.
//!
//! It replaces tiny_http 0.12, which allocated a request's whole
//! `Content-Length` while dropping it (a 99999999999 aborted the monitor),
//! gave every connection a thread of its own without a bound, had no
//! timeouts and verified passwords on the serving thread.

pub mod auth;
pub mod request;

use auth::{Auth, Check};
use request::{Method, Refusal, Request};
use rustix::event::{PollFd, PollFlags};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

pub const MAX_CONNECTIONS: usize = 128;
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// After a refusal the connection is closed; what the client still sends
/// meanwhile is read and dropped for this long (at most [`DRAIN_BYTES`]),
/// so that the kernel does not reset the connection under the answer.
const DRAIN: Duration = Duration::from_secs(1);
const DRAIN_BYTES: usize = 256 << 10;

/// An answer: status, content type, body and any further header lines.
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub headers: Vec<(&'static str, &'static str)>,
}

impl Answer {
    pub fn text(status: u16, body: &str) -> Answer {
        Answer { status, content_type: "text/plain; charset=utf-8", body: body.into(), headers: Vec::new() }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// The bytes of `a` answering a request of `method`, the connection kept
/// open or not.
fn serialise(a: &Answer, method: Method, keep_alive: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n",
        a.status,
        reason(a.status),
        a.content_type,
        a.body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    )
    .into_bytes();
    for (k, v) in &a.headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    if method != Method::Head {
        out.extend_from_slice(&a.body);
    }
    out
}

/// Where a connection is.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Phase {
    /// Waiting for (the rest of) a request's head.
    Reading,
    /// Its credentials are with the verifier (the ticket).
    Verifying(u64),
    /// Sending an answer; then closing, or reading the next request.
    Writing { close: bool },
    /// Answer sent, write side shut: reading and dropping until the
    /// client closes or [`DRAIN`] is over.
    Draining,
}

struct Conn {
    sock: TcpStream,
    peer: IpAddr,
    tls: Option<rustls::ServerConnection>,
    /// Plaintext received and not yet parsed.
    input: Vec<u8>,
    /// Plaintext answer not yet sent (without TLS), and how much was.
    output: Vec<u8>,
    sent: usize,
    phase: Phase,
    /// When the phase must be over.
    deadline: Instant,
    /// The request waiting for its credentials' check.
    waiting: Option<Request>,
    drained: usize,
    /// Whether it has ever had a whole request (for the choice of whom to
    /// close at the limit).
    since: Instant,
}

enum Io {
    /// Nothing more now.
    Again,
    /// The peer closed, or the connection failed.
    Closed,
}

impl Conn {
    fn new(sock: TcpStream, peer: IpAddr, tls: Option<&Arc<rustls::ServerConfig>>) -> Option<Conn> {
        sock.set_nonblocking(true).ok()?;
        let _ = sock.set_nodelay(true);
        let tls = match tls {
            Some(cfg) => {
                let mut c = rustls::ServerConnection::new(Arc::clone(cfg)).ok()?;
                // The answer is bounded by the page; rustls holds it whole.
                c.set_buffer_limit(None);
                Some(c)
            }
            None => None,
        };
        let now = Instant::now();
        Some(Conn {
            sock,
            peer,
            tls,
            input: Vec::new(),
            output: Vec::new(),
            sent: 0,
            phase: Phase::Reading,
            deadline: now + HEAD_TIMEOUT,
            waiting: None,
            drained: 0,
            since: now,
        })
    }

    /// Reads what has come, into `input` (at most a head's limit and a
    /// read more); the plaintext for TLS.
    fn receive(&mut self) -> Io {
        let mut buf = [0u8; 8192];
        loop {
            if self.input.len() > request::MAX_HEAD {
                return Io::Again;
            }
            match &mut self.tls {
                None => match self.sock.read(&mut buf) {
                    Ok(0) => return Io::Closed,
                    Ok(n) => self.input.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Io::Again,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return Io::Closed,
                },
                Some(tls) => {
                    match tls.read_tls(&mut self.sock) {
                        Ok(0) => return Io::Closed,
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => return Io::Again,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(_) => return Io::Closed,
                    }
                    if tls.process_new_packets().is_err() {
                        // Its alert, then the end.
                        let _ = tls.write_tls(&mut self.sock);
                        return Io::Closed;
                    }
                    loop {
                        match tls.reader().read(&mut buf) {
                            Ok(0) => return Io::Closed,
                            Ok(n) => self.input.extend_from_slice(&buf[..n]),
                            Err(_) => break,
                        }
                        if self.input.len() > request::MAX_HEAD {
                            break;
                        }
                    }
                    // Handshake messages to send back.
                    if tls.wants_write() && matches!(self.flush_tls(), Io::Closed) {
                        return Io::Closed;
                    }
                }
            }
        }
    }

    fn flush_tls(&mut self) -> Io {
        let Some(tls) = &mut self.tls else { return Io::Again };
        while tls.wants_write() {
            match tls.write_tls(&mut self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Io::Again,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Io::Closed,
            }
        }
        Io::Again
    }

    /// Queues `bytes` as the answer; the connection closes after it or not.
    fn answer(&mut self, bytes: Vec<u8>, close: bool) {
        match &mut self.tls {
            Some(tls) => {
                let _ = tls.writer().write_all(&bytes);
                if close {
                    tls.send_close_notify();
                }
            }
            None => {
                self.output = bytes;
                self.sent = 0;
            }
        }
        self.phase = Phase::Writing { close };
        self.deadline = Instant::now() + WRITE_TIMEOUT;
    }

    /// Sends what it can of the answer; whether all of it went.
    fn send(&mut self) -> Result<bool, ()> {
        if self.tls.is_some() {
            if matches!(self.flush_tls(), Io::Closed) {
                return Err(());
            }
            return Ok(!self.tls.as_ref().is_some_and(|t| t.wants_write()));
        }
        while self.sent < self.output.len() {
            match self.sock.write(&self.output[self.sent..]) {
                Ok(0) => return Err(()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        self.output = Vec::new();
        Ok(true)
    }

    /// What the connection waits for in `poll`.
    fn interest(&self) -> PollFlags {
        match self.phase {
            Phase::Reading | Phase::Draining => PollFlags::IN,
            Phase::Verifying(_) => PollFlags::empty(),
            Phase::Writing { .. } => PollFlags::OUT,
        }
    }
}

/// What serves requests whose head is whole and whose credentials passed.
pub type Handler<'a> = dyn Fn(&Request) -> Answer + Sync + 'a;

/// The listening socket, its TLS and its users.
pub struct Server {
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    auth: Option<Auth>,
}

impl Server {
    /// Listens on `addr`, with TLS (`tls`: its configuration) and basic
    /// auth (`users`: user -> bcrypt hash; empty: none).
    pub fn bind(
        addr: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
        users: std::collections::BTreeMap<String, String>,
    ) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let auth = if users.is_empty() { None } else { Some(Auth::new(users)?) };
        Ok(Server { listener, tls, auth })
    }

    /// The address it listens on (the port bound for `:0`).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop`: the verifier on a thread of its own (started
    /// here, so it runs where this thread may), connections on this one.
    pub fn serve(&self, handler: &Handler<'_>, stop: &AtomicBool) {
        std::thread::scope(|s| {
            if let Some(auth) = &self.auth {
                let started = std::thread::Builder::new()
                    .name("rtscope-http-auth".into())
                    .spawn_scoped(s, move || auth.verify_until_stopped());
                if started.is_err() {
                    eprintln!("rtscope monitor: cannot start the password checker: every request gets 503");
                }
            }
            self.run(handler, stop);
            if let Some(auth) = &self.auth {
                auth.stop();
            }
        });
    }

    fn run(&self, handler: &Handler<'_>, stop: &AtomicBool) {
        let mut conns: Vec<Conn> = Vec::new();
        let mut ready: Vec<(usize, PollFlags)> = Vec::new();
        while !stop.load(Relaxed) {
            ready.clear();
            let now = Instant::now();
            let next = conns.iter().map(|c| c.deadline).min().map_or(Duration::from_millis(200), |d| {
                d.saturating_duration_since(now).min(Duration::from_millis(200))
            });
            let timeout = rustix::event::Timespec { tv_sec: 0, tv_nsec: next.as_nanos().max(1_000_000) as i64 };
            let accept = {
                let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(conns.len() + 2);
                fds.push(PollFd::new(&self.listener, PollFlags::IN));
                if let Some(a) = &self.auth {
                    fds.push(PollFd::from_borrowed_fd(a.done_fd.as_fd(), PollFlags::IN));
                }
                let base = fds.len();
                for c in &conns {
                    fds.push(PollFd::new(&c.sock, c.interest()));
                }
                if rustix::event::poll(&mut fds, Some(&timeout)).is_err() {
                    continue;
                }
                for (i, f) in fds[base..].iter().enumerate() {
                    if !f.revents().is_empty() {
                        ready.push((i, f.revents()));
                    }
                }
                !fds[0].revents().is_empty()
            };
            for &(i, flags) in &ready {
                self.step(&mut conns[i], flags, handler);
            }
            if let Some(auth) = &self.auth {
                for (ticket, allowed) in auth.finished() {
                    if let Some(c) = conns.iter_mut().find(|c| c.phase == Phase::Verifying(ticket)) {
                        let req = c.waiting.take().expect("a request waits with its ticket");
                        let a = if allowed { handler(&req) } else { unauthorized() };
                        c.answer(serialise(&a, req.method, req.keep_alive), !req.keep_alive);
                        self.step(c, PollFlags::OUT, handler);
                    }
                }
            }
            // Over their time, or done: closed (dropped).
            let now = Instant::now();
            conns.retain(|c| c.deadline > now && !matches!(c.phase, Phase::Draining if c.drained == usize::MAX));
            if accept {
                self.accept(&mut conns);
            }
        }
    }

    /// Takes the connections waiting, closing the one that has waited
    /// longest for a whole request when the table is full.
    fn accept(&self, conns: &mut Vec<Conn>) {
        for _ in 0..64 {
            let (sock, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(_) => return,
            };
            if conns.len() >= MAX_CONNECTIONS {
                let oldest = conns
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| matches!(c.phase, Phase::Reading | Phase::Draining))
                    .min_by_key(|(_, c)| c.since)
                    .map(|(i, _)| i);
                match oldest {
                    Some(i) => {
                        conns.swap_remove(i);
                    }
                    // Every one is being answered: this one waits its turn
                    // closed.
                    None => continue,
                }
            }
            if let Some(c) = Conn::new(sock, peer.ip(), self.tls.as_ref()) {
                conns.push(c);
            }
        }
    }

    /// Moves a connection on after `poll` said `flags`.
    fn step(&self, c: &mut Conn, flags: PollFlags, handler: &Handler<'_>) {
        let closed = |c: &mut Conn| c.deadline = Instant::now() - Duration::from_secs(1);
        if flags.intersects(PollFlags::ERR | PollFlags::NVAL) {
            return closed(c);
        }
        loop {
            match c.phase {
                Phase::Reading => {
                    let io = c.receive();
                    match request::head_end(&c.input) {
                        Some(end) => {
                            let head: Vec<u8> = c.input.drain(..end).collect();
                            c.since = Instant::now();
                            self.request(c, request::parse(&head), handler);
                            if !matches!(c.phase, Phase::Writing { .. }) {
                                return;
                            }
                        }
                        None if c.input.len() > request::MAX_HEAD => {
                            let a = Answer::text(431, "request header fields too large\n");
                            c.answer(serialise(&a, Method::Get, false), true);
                        }
                        None => {
                            if matches!(io, Io::Closed) {
                                closed(c);
                            }
                            return;
                        }
                    }
                }
                Phase::Writing { close } => match c.send() {
                    Err(()) => return closed(c),
                    Ok(false) => return,
                    Ok(true) if close => {
                        let _ = c.sock.shutdown(std::net::Shutdown::Write);
                        c.phase = Phase::Draining;
                        c.deadline = Instant::now() + DRAIN;
                    }
                    Ok(true) => {
                        c.phase = Phase::Reading;
                        c.deadline = Instant::now() + IDLE_TIMEOUT;
                        // A request sent behind this one (pipelined) is
                        // served now, else the next is awaited.
                        if request::head_end(&c.input).is_none() {
                            if !c.input.is_empty() {
                                c.deadline = Instant::now() + HEAD_TIMEOUT;
                            }
                            return;
                        }
                    }
                },
                Phase::Draining => {
                    let mut buf = [0u8; 8192];
                    loop {
                        match c.sock.read(&mut buf) {
                            Ok(n) if n > 0 && c.drained + n < DRAIN_BYTES => c.drained += n,
                            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                            Err(e) if e.kind() == ErrorKind::Interrupted => {}
                            _ => {
                                c.drained = usize::MAX;
                                return;
                            }
                        }
                    }
                }
                Phase::Verifying(_) => return,
            }
        }
    }

    /// Answers a whole head: refused, checked, or served.
    fn request(&self, c: &mut Conn, parsed: Result<Request, Refusal>, handler: &Handler<'_>) {
        let req = match parsed {
            Ok(r) => r,
            Err(r) => {
                c.answer(serialise(&Answer::text(r.status, r.why), Method::Get, false), true);
                return;
            }
        };
        let check = self.auth.as_ref().map_or(Check::Allowed, |a| a.check(req.authorization.as_deref(), c.peer));
        let answer = match check {
            Check::Allowed => handler(&req),
            Check::Refused => unauthorized(),
            Check::Busy => {
                let mut a = Answer::text(429, "too many passwords are being checked: try again\n");
                a.headers.push(("Retry-After", "1"));
                c.answer(serialise(&a, req.method, false), true);
                return;
            }
            Check::Pending(ticket) => {
                c.phase = Phase::Verifying(ticket);
                c.deadline = Instant::now() + HEAD_TIMEOUT + WRITE_TIMEOUT;
                c.waiting = Some(req);
                return;
            }
        };
        c.answer(serialise(&answer, req.method, req.keep_alive), !req.keep_alive);
    }
}

fn unauthorized() -> Answer {
    let mut a = Answer::text(401, "unauthorized\n");
    a.headers.push(("WWW-Authenticate", "Basic realm=\"rtscope\""));
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_whole_http() {
        let a = Answer::text(200, "hi\n");
        let s = String::from_utf8(serialise(&a, Method::Get, true)).unwrap();
        assert!(
            s.starts_with("HTTP/1.1 200 OK\r\n") && s.contains("Content-Length: 3\r\n") && s.ends_with("\r\n\r\nhi\n")
        );
        let s = String::from_utf8(serialise(&unauthorized(), Method::Head, false)).unwrap();
        assert!(s.contains("WWW-Authenticate: Basic") && s.contains("Connection: close") && s.ends_with("\r\n\r\n"));
    }

    /// Hostile requests on a real socket: each answered or closed within
    /// its bound, and a scrape beside them answered at once.
    #[test]
    fn a_server_on_loopback_answers_scrapes_beside_hostile_clients() {
        let server = Server::bind("127.0.0.1:0".parse().unwrap(), None, Default::default()).unwrap();
        let addr = server.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        let handler = |r: &Request| Answer::text(200, &format!("{}\n", r.path));
        std::thread::scope(|s| {
            s.spawn(|| server.serve(&handler, &stop));
            let ask = |raw: &[u8]| -> String {
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let _ = c.write_all(raw);
                let mut out = Vec::new();
                let _ = c.read_to_end(&mut out);
                String::from_utf8_lossy(&out).into_owned()
            };
            // Slow clients holding connections open.
            let idle: Vec<TcpStream> = (0..40)
                .map(|_| {
                    let mut c = TcpStream::connect(addr).unwrap();
                    let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nX: ");
                    c
                })
                .collect();
            let huge = ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\nabc");
            assert!(huge.starts_with("HTTP/1.1 413"), "{huge}");
            let chunked = ask(b"POST /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffff\r\n");
            assert!(chunked.starts_with("HTTP/1.1 413"), "{chunked}");
            let many: String = (0..10_000).map(|i| format!("X-{i}: a\r\n")).collect();
            let r = ask(format!("GET /metrics HTTP/1.1\r\n{many}\r\n").as_bytes());
            assert!(r.starts_with("HTTP/1.1 431"), "{}", &r[..r.len().min(200)]);
            let t = Instant::now();
            let ok = ask(b"GET /metrics HTTP/1.0\r\n\r\n");
            assert!(ok.starts_with("HTTP/1.1 200") && ok.ends_with("/metrics\n"), "{ok}");
            assert!(t.elapsed() < Duration::from_secs(1));
            // Two requests on one connection (keep-alive, pipelined).
            let two = ask(b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\n");
            assert!(two.contains("/a\n") && two.ends_with("/b\n"), "{two}");
            // More connections than the table holds: the newest is served.
            let crowd: Vec<TcpStream> = (0..MAX_CONNECTIONS).map(|_| TcpStream::connect(addr).unwrap()).collect();
            std::thread::sleep(Duration::from_millis(300));
            let ok = ask(b"GET /late HTTP/1.0\r\n\r\n");
            assert!(ok.ends_with("/late\n"), "{ok}");
            drop((idle, crowd));
            stop.store(true, Relaxed);
        });
    }
}
