//! Basic auth off the serving thread. A bcrypt check costs tens of
//! milliseconds (cost 10) to a quarter of a second (cost 12, the most the
//! web configuration may ask), so the serving thread never runs one: it
//! answers from the caches or hands the check to one verifier thread, and
//! serves every other connection meanwhile. As exporter-toolkit does, the
//! checks run one at a time (a flood of passwords costs one CPU at most),
//! an unknown user is checked against a real user's hash (the same time,
//! so users cannot be told by timing), and both outcomes are cached, so a
//! password sent again costs nothing. Unlike it, a credential that
//! verified stays cached for the monitor's life (Prometheus sends the same
//! one every scrape: answered at once, whatever else waits), and the work
//! waiting is bounded: [`MAX_QUEUED`] checks in all and
//! [`MAX_PER_PEER`] per client address; a request beyond them gets 429
//! at once, never a growing queue that a real scrape would wait behind.

use base64::Engine;
use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::{Condvar, Mutex};

/// Checks waiting or running, in all and per client address.
pub const MAX_QUEUED: usize = 8;
pub const MAX_PER_PEER: usize = 2;
/// Credentials remembered as verified (Prometheus servers, each with its
/// password), and as refused.
const MAX_GOOD: usize = 64;
const MAX_BAD: usize = 1024;

/// What the serving thread learns at once of a request's credentials.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    Allowed,
    Refused,
    /// Handed to the verifier: its answer comes with this ticket.
    Pending(u64),
    /// Too many checks wait already (in all, or from this address).
    Busy,
}

struct Job {
    ticket: u64,
    key: u64,
    peer: IpAddr,
    known: bool,
    password: Vec<u8>,
    hash: String,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Checks queued or running per address.
    per_peer: HashMap<IpAddr, usize>,
    running: usize,
    good: HashSet<u64>,
    bad: HashSet<u64>,
    bad_order: VecDeque<u64>,
    /// Finished checks: (ticket, allowed).
    done: Vec<(u64, bool)>,
    next_ticket: u64,
    stop: bool,
}

/// The users and their hashes, the caches and the verifier's queue.
pub struct Auth {
    users: BTreeMap<String, String>,
    state: Mutex<State>,
    wake_verifier: Condvar,
    /// Written when a check is done, so that the serving thread's poll wakes.
    pub done_fd: OwnedFd,
    hasher: RandomState,
}

impl Auth {
    /// `users`: user -> bcrypt hash, checked already (web.rs); not empty.
    pub fn new(users: BTreeMap<String, String>) -> std::io::Result<Auth> {
        let done_fd =
            rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK)?;
        Ok(Auth {
            users,
            state: Mutex::new(State::default()),
            wake_verifier: Condvar::new(),
            done_fd,
            hasher: RandomState::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a request with this `Authorization` value from `peer` gets.
    pub fn check(&self, authorization: Option<&str>, peer: IpAddr) -> Check {
        let Some(b64) = authorization.and_then(|a| a.strip_prefix("Basic ")) else { return Check::Refused };
        let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) else { return Check::Refused };
        let Some(colon) = raw.iter().position(|&b| b == b':') else { return Check::Refused };
        let (user, password) = (&raw[..colon], &raw[colon + 1..]);
        let user = String::from_utf8_lossy(user);
        let (known, hash) = match self.users.get(user.as_ref()) {
            Some(h) => (true, h.clone()),
            // Checked against a real hash all the same: an unknown user
            // takes as long as a wrong password.
            None => (false, self.users.values().next().cloned().unwrap_or_default()),
        };
        let key = self.hasher.hash_one((user.as_ref(), password, &hash));
        let mut s = self.lock();
        if s.good.contains(&key) {
            return Check::Allowed;
        }
        if s.bad.contains(&key) {
            return Check::Refused;
        }
        let waiting = s.queue.len() + s.running;
        let from_peer = s.per_peer.get(&peer).copied().unwrap_or(0);
        if waiting >= MAX_QUEUED || from_peer >= MAX_PER_PEER {
            return Check::Busy;
        }
        s.next_ticket += 1;
        let ticket = s.next_ticket;
        *s.per_peer.entry(peer).or_default() += 1;
        s.queue.push_back(Job { ticket, key, peer, known, password: password.to_vec(), hash });
        self.wake_verifier.notify_one();
        Check::Pending(ticket)
    }

    /// The checks finished since the last call: (ticket, allowed).
    pub fn finished(&self) -> Vec<(u64, bool)> {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.done_fd, &mut buf);
        std::mem::take(&mut self.lock().done)
    }

    /// The verifier thread: runs the queued checks one at a time until
    /// [`Auth::stop`].
    pub fn verify_until_stopped(&self) {
        loop {
            let job = {
                let mut s = self.lock();
                loop {
                    if s.stop {
                        return;
                    }
                    if let Some(j) = s.queue.pop_front() {
                        s.running += 1;
                        break j;
                    }
                    s = self.wake_verifier.wait(s).unwrap_or_else(|e| e.into_inner());
                }
            };
            let ok = bcrypt::verify(&job.password, &job.hash).unwrap_or(false) && job.known;
            let mut s = self.lock();
            s.running -= 1;
            if let Some(n) = s.per_peer.get_mut(&job.peer) {
                *n -= 1;
                if *n == 0 {
                    s.per_peer.remove(&job.peer);
                }
            }
            if ok {
                if s.good.len() < MAX_GOOD {
                    s.good.insert(job.key);
                }
            } else if s.bad.insert(job.key) {
                s.bad_order.push_back(job.key);
                if s.bad_order.len() > MAX_BAD
                    && let Some(old) = s.bad_order.pop_front()
                {
                    s.bad.remove(&old);
                }
            }
            s.done.push((job.ticket, ok));
            drop(s);
            let _ = rustix::io::write(&self.done_fd, &1u64.to_ne_bytes());
        }
    }

    /// Ends [`Auth::verify_until_stopped`] (after the check it runs).
    pub fn stop(&self) {
        self.lock().stop = true;
        self.wake_verifier.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(u: &str, p: &str) -> String {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}")))
    }

    /// The first check of a credential is the verifier's; its outcome is
    /// cached either way; a flood beyond the bounds is told Busy at once.
    #[test]
    fn checks_are_queued_bounded_and_cached() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let auth = Auth::new([("prom".to_string(), hash)].into()).unwrap();
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(auth.check(None, peer), Check::Refused);
        assert_eq!(auth.check(Some("Bearer x"), peer), Check::Refused);
        assert_eq!(auth.check(Some("Basic !!"), peer), Check::Refused);
        let good = header("prom", "s3cret");
        let Check::Pending(t1) = auth.check(Some(&good), peer) else { panic!() };
        let Check::Pending(t2) = auth.check(Some(&header("prom", "wrong")), peer) else { panic!() };
        assert_eq!(auth.check(Some(&header("nobody", "x")), peer), Check::Busy, "two per address");
        let Check::Pending(t3) = auth.check(Some(&header("nobody", "s3cret")), other) else { panic!() };
        std::thread::scope(|s| {
            s.spawn(|| auth.verify_until_stopped());
            let mut done = Vec::new();
            while done.len() < 3 {
                done.extend(auth.finished());
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            done.sort();
            assert_eq!(done, [(t1, true), (t2, false), (t3, false)]);
            auth.stop();
        });
        assert_eq!(auth.check(Some(&good), peer), Check::Allowed, "cached");
        assert_eq!(auth.check(Some(&header("prom", "wrong")), peer), Check::Refused, "cached");
        assert_eq!(auth.check(Some(&header("nobody", "s3cret")), other), Check::Refused, "an unknown user");
    }
}
