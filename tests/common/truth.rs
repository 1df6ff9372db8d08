//! Ground truth by timestamps. `rtscope disturb --log FILE` writes every
//! burst it ran (start and end on CLOCK_MONOTONIC, its thread); a test
//! judges a measurement against those bursts, sample by sample, rather than
//! by shares of what a noisy host does.
//!
//! The physics the judgements rest on: while a SCHED_FIFO 99 spinner runs
//! on a CPU, nothing of a lower priority runs there. So a wake-up
//! programmed inside a burst cannot come before the burst's end (a strict
//! bound, whatever the host does), and comes after it by the context
//! switch, unless the host stalls this VM in that short window: no more
//! often than the host's stalls of that size hit an ordinary sample of the
//! same run (or the disturber's own wake-ups, which cross the same VM
//! exits as a hand-over), which sets the bound on how many may, at a
//! false-failure rate of [`FALSE_FAILURE`] per judgement.

use super::BIN;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The false-failure rate each judgement is built for.
pub const FALSE_FAILURE: f64 = 1e-4;

/// One burst of the disturber, as it logged it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    pub start: u64,
    pub end: u64,
    pub tid: i64,
    /// The part of the burst the spinner did not have the CPU (its length
    /// less its own CPU time in it): the kernel's real-time throttling
    /// runs other threads inside a burst once real-time ones have had 95 %
    /// of a second, as another real-time load on the machine can make.
    pub off: u64,
    /// Its own wake-up before it: the time from the instant its sleep was
    /// programmed to end to its first clock read (a timer interrupt, a
    /// wake-up and a context switch, VM exits among them on a guest), in
    /// which it already held the CPU. 0 where the log has no `due_ns`.
    pub lead: u64,
}

impl Burst {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// How much of [a, b] it covers.
    pub fn overlap(&self, a: u64, b: u64) -> u64 {
        self.end.min(b).saturating_sub(self.start.max(a))
    }

    /// Whether it comes within `margin` of [a, b], counted from its own
    /// wake-up (`lead` before its start: it holds the CPU from there; a
    /// host stall inside that wake-up put one 126 us before the logged
    /// start, with its thread on the CPU).
    pub fn near(&self, a: u64, b: u64, margin: u64) -> bool {
        self.start.saturating_sub(self.lead) < b + margin && a < self.end + margin
    }
}

/// A running `rtscope disturb` with its burst log.
pub struct Disturber {
    child: Child,
    log: PathBuf,
}

impl Disturber {
    /// A SCHED_FIFO 99 spinner on `cpu`: `spin` every `period` (choose one
    /// that is no multiple of the probe's), each at a random phase in the
    /// first millisecond of its period, for at most `duration`. Returns
    /// once it has logged its first burst.
    pub fn start(dir: &Path, cpu: &str, period: &str, spin: &str, duration: &str) -> Disturber {
        Self::start_at(dir, cpu, "99", period, spin, duration)
    }

    /// [`Disturber::start`] at SCHED_FIFO `priority`.
    pub fn start_at(dir: &Path, cpu: &str, priority: &str, period: &str, spin: &str, duration: &str) -> Disturber {
        let log = dir.join(format!("bursts-{}", std::process::id()));
        let child = Command::new(BIN)
            .args(["disturb", "--cpu", cpu, "--priority", priority, "--period", period, "--spin", spin])
            .args(["--phase-jitter", "1ms", "--duration", duration, "--log", log.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rtscope disturb");
        let d = Disturber { child, log };
        let until = Instant::now() + Duration::from_secs(10);
        while d.read().is_empty() {
            assert!(Instant::now() < until, "rtscope disturb logged no burst in 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    fn read(&self) -> Vec<Burst> {
        read_bursts(&self.log)
    }

    /// Stops it (SIGTERM: it ends its log cleanly) and returns every burst.
    pub fn finish(mut self) -> Vec<Burst> {
        // SAFETY: kill() on our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "rtscope disturb: {status}");
        self.read()
    }
}

impl Drop for Disturber {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The bursts of a `disturb --log` file.
pub fn read_bursts(path: &Path) -> Vec<Burst> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let (start, end): (u64, u64) = (f.first()?.parse().ok()?, f.get(1)?.parse().ok()?);
            let cpu: u64 = f.get(3).and_then(|c| c.parse().ok()).unwrap_or(end - start);
            let due: u64 = f.get(4).and_then(|c| c.parse().ok()).unwrap_or(start);
            let (tid, off, lead) =
                (f.get(2)?.parse().ok()?, (end - start).saturating_sub(cpu), start.saturating_sub(due));
            Some(Burst { start, end, tid, off, lead })
        })
        .collect()
}

/// The burst that covers most of [a, b], if any covers part of it.
pub fn burst_over(bursts: &[Burst], a: u64, b: u64) -> Option<&Burst> {
    bursts.iter().filter(|x| x.overlap(a, b) > 0).max_by_key(|x| x.overlap(a, b))
}

/// The first instant of the grid `phase + k * interval` in [a, b), if any.
pub fn grid_point_in(phase: u64, interval: u64, a: u64, b: u64) -> Option<u64> {
    let k = a.saturating_sub(phase).div_ceil(interval);
    let p = phase + k * interval;
    (p < b).then_some(p)
}

/// ln P(X = k) for X ~ Binomial(n, q), 0 < q < 1, for every k in 0..=n.
fn log_pmf(n: u64, q: f64) -> Vec<f64> {
    let mut lp = Vec::with_capacity(n as usize + 1);
    let mut v = n as f64 * (1.0 - q).ln();
    lp.push(v);
    for k in 0..n {
        v += ((n - k) as f64 / (k + 1) as f64).ln() + (q / (1.0 - q)).ln();
        lp.push(v);
    }
    lp
}

/// The smallest k with P(X > k) < `alpha` for X ~ Binomial(n, q).
pub fn binomial_upper(n: u64, q: f64, alpha: f64) -> u64 {
    if q <= 0.0 {
        return 0;
    }
    if q >= 1.0 {
        return n;
    }
    let lp = log_pmf(n, q);
    let mut tail = 0.0;
    for k in (0..=n).rev() {
        tail += lp[k as usize].exp();
        if tail >= alpha {
            return k;
        }
    }
    0
}

/// The largest k with P(X < k) < `alpha` for X ~ Binomial(n, q).
pub fn binomial_lower(n: u64, q: f64, alpha: f64) -> u64 {
    if q <= 0.0 {
        return 0;
    }
    if q >= 1.0 {
        return n;
    }
    let lp = log_pmf(n, q);
    let mut below = 0.0;
    for k in 0..=n {
        below += lp[k as usize].exp();
        if below >= alpha {
            return k;
        }
    }
    n
}

/// An upper confidence bound (at about 1e-4) on a rate seen `k` times in
/// `n` trials, never below `floor`.
pub fn rate_upper(k: u64, n: u64, floor: f64) -> f64 {
    let k = k as f64;
    ((k + 4.0 + 4.0 * (k + 1.0).sqrt()) / n.max(1) as f64).max(floor).min(1.0)
}

/// An upper bound on how often the host stalls the disturber's own
/// wake-ups by more than `by` over their median (see [`rate_upper`]; at
/// least `floor`). A wake-up crosses the same VM exits as the hand-over
/// back to the measuring thread after a burst (its timer, a wake-up, a
/// context switch), where a vCPU that spins between them (an ordinary
/// sample of a spinning probe) crosses none: on a busy host its stalls
/// are the better reference for a hand-over's. `floor` where the log
/// has no wake-ups (no `due_ns`).
pub fn wake_stall_rate(bursts: &[Burst], by: u64, floor: f64) -> f64 {
    let mut leads: Vec<u64> = bursts.iter().map(|b| b.lead).filter(|&l| l > 0).collect();
    if leads.is_empty() {
        return floor;
    }
    leads.sort_unstable();
    let median = leads[leads.len() / 2];
    let late = leads.iter().filter(|&&l| l > median + by).count() as u64;
    rate_upper(late, leads.len() as u64, floor)
}

/// The host's stalls among a timer's `samples` (programmed instant,
/// latency): those late by more than `tol` with no burst within `tol`.
fn host_stalls(samples: &[(u64, u64)], bursts: &[Burst], tol: u64) -> u64 {
    samples.iter().filter(|&&(p, l)| l > tol && !bursts.iter().any(|b| b.near(p, p + l, tol))).count() as u64
}

/// The allowance for bursts that did not hold the CPU as they should have.
///
/// What it allows: bursts the spinner's own clock says it spun through,
/// yet the measurement beside them shows another thread on that CPU for
/// most of the burst (a traced episode's causes, tests/trace.rs), or a job
/// on that CPU that met its deadline through it (tests/task.rs). `odd` are
/// those bursts, out of `chances` bursts that should have shown.
///
/// Why: both are seen on this guest (about one traced run in ten, each time
/// with the same SCHED_OTHER thread of the guest's agent, beside
/// millisecond "interrupts off or hypervisor" episodes; a job once in some
/// forty runs), and nothing in the guest explains them: the host's doing,
/// as its stalls are. So they are allowed as often as the host's own
/// stalls hit an ordinary sample of the same run, `q` (an upper bound on
/// that rate, from [`rate_upper`]), and no more.
///
/// The bound: at most [`binomial_upper`]`(chances, q)` of them, at a
/// false-failure rate of [`FALSE_FAILURE`]; panics, listing them, beyond
/// it. The bursts that are not odd are judged strictly by the caller.
pub fn allow_unheld<T: std::fmt::Debug>(what: &str, odd: &[T], chances: u64, q: f64) {
    let allowed = binomial_upper(chances, q, FALSE_FAILURE);
    assert!(
        odd.len() as u64 <= allowed,
        "{what}: {} of {chances} (the host's rate allows {allowed}): {odd:#?}",
        odd.len()
    );
}

/// One sample that a burst met: what the burst alone explains, and what
/// was measured.
#[derive(Clone, Copy, Debug)]
pub struct Met {
    /// The sample's time (CLOCK_MONOTONIC ns), to name it.
    pub at: u64,
    pub explained: u64,
    pub measured: u64,
    /// Measured time that is not the spinner's but may fall inside the
    /// burst (interrupts on top of it): the strict lower bound allows it.
    pub slack: u64,
    /// Measured time before the burst that is still the disturber's (its
    /// own wake-up, [`Burst::lead`]): the upper bound allows it.
    pub lead: u64,
}

/// The most the hand-over from the disturber back to the measuring thread
/// may cost on a guest (its sleep, the switch, the measuring thread's
/// return), as the run's median excess shows it: 15-40 us on a quiet KVM
/// guest, up to 80 us beside a busy build.
pub const MAX_SWITCH: i64 = 100_000;

/// Judges the samples the bursts met: none measured shorter than the burst
/// explains (less `lo_tol` and its slack): that cannot happen, whatever
/// the host does. The hand-over back to the measuring thread costs what it
/// costs on this machine: the run's own median excess is taken as it (it
/// must stay under [`MAX_SWITCH`]: more is an error of the measurement,
/// not a switch). Longer than the burst and that by more than `hi_tol` at
/// most as often as the host's own stalls hit a sample, `q` (an upper
/// bound, from the same run), allows at [`FALSE_FAILURE`]. Prints the
/// figures; panics, listing the offending samples, when a bound is broken.
pub fn judge(what: &str, met: &[Met], lo_tol: u64, hi_tol: u64, q: f64) {
    let short: Vec<&Met> = met.iter().filter(|m| m.measured + lo_tol + m.slack < m.explained).collect();
    let mut excess: Vec<i64> = met.iter().map(|m| m.measured as i64 - (m.explained + m.lead) as i64).collect();
    excess.sort_unstable();
    let median = excess.get(excess.len() / 2).copied().unwrap_or(0);
    let switch = median.clamp(0, MAX_SWITCH) as u64;
    let long: Vec<&Met> = met.iter().filter(|m| m.measured > m.explained + m.lead + switch + hi_tol).collect();
    let allowed = binomial_upper(met.len() as u64, q, FALSE_FAILURE);
    eprintln!(
        "{what}: {} samples met by a burst; measured - explained (with the disturber's own wake-up where it is in): median {median} ns, {} below -{lo_tol} ns, {} above the median's hand-over + {hi_tol} ns (host stalls at rate <= {q:.4} allow {allowed})",
        met.len(),
        short.len(),
        long.len()
    );
    assert!(short.is_empty(), "{what}: measured shorter than the burst that held the CPU: {short:#?}");
    assert!(median <= MAX_SWITCH, "{what}: measured {median} ns longer than the burst at the median: not a hand-over");
    assert!(
        long.len() as u64 <= allowed,
        "{what}: {} of {} longer than their burst (its own wake-up, and the run's median hand-over of {switch} ns) by > {hi_tol} ns: {long:#?}",
        long.len(),
        met.len()
    );
}

/// Judges a timer probe's samples against the bursts: `samples` are
/// (programmed instant, latency) on a grid of `interval`, every sample of
/// the run above `floor` (a fixed `--exceed`, or a fixed cause threshold's
/// episodes); `total` samples were taken over [t0, t1].
///
/// Each burst that holds programmed instants, the last with more than
/// `floor` of the burst after it, must have a sample at one of them (the
/// first where the probe skips the periods it overran, the last where a
/// timer counts them as missed), late by the rest of the burst (see
/// [`judge`]), or a previous sample that woke after the first; as often
/// as the host's stalls allow, a stall at its end may take the thread past
/// the next programmed instant instead. Returns the samples met by bursts.
pub fn judge_timer(
    what: &str,
    samples: &[(u64, u64)],
    interval: u64,
    floor: u64,
    total: u64,
    bursts: &[Burst],
    (t0, t1): (u64, u64),
) -> Vec<Met> {
    const LO_TOL: u64 = 2_000;
    const HI_TOL: u64 = 50_000;
    assert!(!samples.is_empty(), "{what}: no sample above {floor} ns");
    let phase = samples[0].0 % interval;
    let off: Vec<_> = samples.iter().filter(|s| s.0 % interval != phase).collect();
    assert!(off.is_empty(), "{what}: programmed instants off the probe's grid of {interval} ns: {off:?}");
    let at: std::collections::HashMap<u64, u64> = samples.iter().copied().collect();
    let (mut met, mut missing, mut held) = (Vec::new(), Vec::new(), 0u64);
    for b in bursts.iter().filter(|b| b.start >= t0 + interval && b.end + interval <= t1) {
        // The programmed instants inside the burst: the thread runs once
        // after it, so one of them has the sample (a probe that skips the
        // periods it overran, the first; a timer that counts them as
        // missed expirations, the last).
        let points: Vec<u64> =
            std::iter::successors(grid_point_in(phase, interval, b.start, b.end), |p| Some(p + interval))
                .take_while(|&p| p < b.end)
                .collect();
        let Some(&last) = points.last() else { continue };
        held += 1;
        match points.iter().find_map(|p| at.get(p).map(|&latency| (*p, latency))) {
            Some((p, latency)) if b.end - p >= floor + 10_000 => {
                met.push(Met { at: p, explained: b.end - p, measured: latency, slack: 0, lead: 0 })
            }
            Some(_) => {}
            // No sample: only a burst that ends within the floor of its
            // last programmed instant may hide it ...
            None if b.end - last < floor + 10_000 => {}
            // ... or one so close to the next programmed instant that the
            // thread, back after it, may read that one (a timer that
            // counts missed expirations, late by less than the floor) ...
            None if last + interval < b.end + HI_TOL => {}
            // ... or one that a previous sample's lateness overlapped.
            None if samples.iter().any(|&(q, l)| q < points[0] && q + l >= points[0]) => {}
            None => missing.push(*b),
        }
    }
    // The host's stalls: samples no burst came near, late by more than the
    // tolerance, among the samples no burst met. The samples above `floor`
    // are all there is to see them by: a stall shorter than it leaves no
    // trace there, so no longer hand-over than that is judged either.
    let hi_tol = HI_TOL.max(floor);
    let host = host_stalls(samples, bursts, hi_tol);
    // Its other samples are wake-ups too: through the same VM exits as a
    // hand-over.
    let q = rate_upper(host, total.saturating_sub(met.len() as u64), 0.002);
    eprintln!(
        "{what}: {} bursts, {} samples above {floor} ns, {host} of them the host's (no burst near)",
        bursts.len(),
        samples.len()
    );
    // A burst with no sample: a host stall at its end, longer than HI_TOL,
    // took the thread past the next programmed instant, so it read that
    // one, on time. As likely as a stall delaying any other sample by that
    // much; allowed as often as the host's stalls allow at FALSE_FAILURE.
    let allowed = binomial_upper(held, q, FALSE_FAILURE);
    eprintln!(
        "{what}: {} of {held} bursts holding a programmed instant without a sample (host stalls allow {allowed})",
        missing.len()
    );
    assert!(
        missing.len() as u64 <= allowed,
        "{what}: bursts that held a programmed instant but no sample shows: {missing:?}"
    );
    judge(what, &met, LO_TOL, hi_tol, q);
    met
}

/// Judges a spinning probe's interruptions (end, length), every one of
/// the run above `floor`, against the bursts inside [t0, t1]. A burst that
/// starts while the probe spins is one interruption at least as long as
/// the burst (the probe cannot run before its end) and longer only by the
/// spinner's wake-up and the context switches, or by a host stall next to
/// it no more often than the host's stalls start in any other 100 us of
/// the run's `active_ns`, or stall the disturber's own wake-ups
/// ([`wake_stall_rate`]). A
/// burst that starts in one of the probe's pauses is not seen: at least
/// the bursts that a share `active_share` (a lower bound on the probe's
/// duty cycle) would see at [`FALSE_FAILURE`] must be. Returns the bursts
/// seen.
pub fn judge_interruptions(
    what: &str,
    samples: &[(u64, u64)],
    floor: u64,
    active_ns: u64,
    active_share: f64,
    bursts: &[Burst],
    (t0, t1): (u64, u64),
) -> usize {
    const LO_TOL: u64 = 2_000;
    // Beyond the burst and its own wake-up (logged): the context switch
    // back to the measuring thread (a VM exit or two on a KVM guest).
    const HI_TOL: u64 = 100_000;
    let inside: Vec<&Burst> = bursts.iter().filter(|b| b.start >= t0 + 1_000_000 && b.end + 1_000_000 <= t1).collect();
    let mut met = Vec::new();
    for b in &inside {
        let over: Vec<&(u64, u64)> = samples.iter().filter(|&&(t, l)| b.overlap(t - l, t) > 0).collect();
        assert!(over.len() <= 1, "{what}: one burst split into interruptions: {b:?} {over:?}");
        if let Some(&&(t, l)) = over.first() {
            // The interruption starts with the spinner's own timer
            // interrupt and wake-up, before its first clock read.
            met.push(Met { at: t - l, explained: b.len(), measured: l, slack: 0, lead: b.lead });
        }
    }
    let host = samples.iter().filter(|&&(t, l)| !bursts.iter().any(|b| b.near(t - l, t, HI_TOL))).count() as u64;
    // The host's stalls of an ordinary 100 us of the probe's spin, or of
    // the disturber's own wake-ups, whichever is the more often: a
    // hand-over crosses VM exits that the spin does not.
    let q = rate_upper(host, active_ns / HI_TOL, 0.002).max(wake_stall_rate(bursts, HI_TOL, 0.002));
    let want = binomial_lower(inside.len() as u64, active_share, FALSE_FAILURE);
    eprintln!(
        "{what}: {} of {} bursts seen (at least {want} at a duty cycle >= {active_share:.2}); {} interruptions above {floor} ns, {host} of them the host's (no burst near)",
        met.len(),
        inside.len(),
        samples.len()
    );
    assert!(met.len() as u64 >= want, "{what}: only {} of {} bursts seen", met.len(), inside.len());
    judge(what, &met, LO_TOL, HI_TOL, q);
    met.len()
}

/// The periods of a grid `phase + k * interval` that the bursts inside
/// [t0, t1] must have made a timer miss: a burst holding k programmed
/// instants lets the thread read them all at once after it, k - 1 missed.
/// A strict lower bound: the host's stalls can only add.
pub fn missed_at_least(bursts: &[Burst], phase: u64, interval: u64, (t0, t1): (u64, u64)) -> u64 {
    bursts
        .iter()
        .filter(|b| b.start >= t0 + interval && b.end + interval <= t1)
        .map(|b| {
            std::iter::successors(grid_point_in(phase, interval, b.start, b.end), |p| Some(p + interval))
                .take_while(|&p| p < b.end)
                .count() as u64
        })
        .map(|k| k.saturating_sub(1))
        .sum()
}

/// Judges relative sleeps against the bursts: `samples` are (programmed
/// end, deviation), every sample of the run above `floor`; `total` were
/// taken over [t0, t1]. A sleep whose end falls inside a burst, more than
/// `floor` before the burst's end, returns late by the rest of the burst
/// (see [`judge`]). The sleeps' ends are not on a grid (a random phase
/// precedes each): at least the bursts that a share `hit_share` would
/// catch at [`FALSE_FAILURE`] must hold one. Returns the samples met.
pub fn judge_sleeps(
    what: &str,
    samples: &[(u64, u64)],
    floor: u64,
    total: u64,
    hit_share: f64,
    bursts: &[Burst],
    (t0, t1): (u64, u64),
) -> Vec<Met> {
    const LO_TOL: u64 = 2_000;
    const HI_TOL: u64 = 50_000;
    let inside: Vec<&Burst> = bursts.iter().filter(|b| b.start >= t0 + 1_000_000 && b.end + 1_000_000 <= t1).collect();
    let mut met = Vec::new();
    for &(end, deviation) in samples {
        if let Some(b) = inside.iter().find(|b| b.start <= end && end < b.end)
            && b.end - end >= floor + 10_000
        {
            met.push(Met { at: end, explained: b.end - end, measured: deviation, slack: 0, lead: 0 });
        }
    }
    // The samples above `floor` are all there is to see the host's stalls
    // by: a stall shorter than it leaves no trace there, so no longer
    // hand-over than that is judged either.
    let hi_tol = HI_TOL.max(floor);
    let host = host_stalls(samples, bursts, hi_tol);
    let q = rate_upper(host, total.saturating_sub(met.len() as u64), 0.002);
    let want = binomial_lower(inside.len() as u64, hit_share, FALSE_FAILURE);
    eprintln!(
        "{what}: {} of {} bursts held a sleep's end (at least {want} at a share >= {hit_share:.2}); {} samples above {floor} ns, {host} of them the host's (no burst near)",
        met.len(),
        inside.len(),
        samples.len()
    );
    assert!(met.len() as u64 >= want, "{what}: only {} of {} bursts held a sleep's end", met.len(), inside.len());
    judge(what, &met, LO_TOL, hi_tol, q);
    met
}
