//! `rtscope monitor`: the probes run together until stopped, each a run of
//! kind `monitor` in the monitor's own store, and `/metrics` serves their
//! committed checkpoint intervals to Prometheus. A retention pass every
//! minute keeps the store bounded (`--retain`, `--max-store`): older
//! intervals are summarised, never dropped.
//!
//! The endpoint only reads: it answers GET (and HEAD) on `/metrics` and a
//! short index on `/`; nothing it receives is written or run. With
//! `--web-config` it speaks TLS and asks for basic auth (`web.rs`).

pub mod accelerated;
mod http;
mod web;

use crate::cli::{MonitorArgs, MonitorPlan};
use crate::probe::{Cell, Common, Probe};
use crate::recorder::Tap;
use crate::session::{Session, verdict};
use crate::sys::{clock, cpu, mem};
use anyhow::{Context, Result, anyhow};
use rtscope_model::episode::CauseKind;
use rtscope_model::hist::Tally;
use rtscope_model::inventory::format_cpu_list;
use rtscope_model::metrics::{Exposition, Format, Health, SeriesCounters};
use rtscope_model::run::{RunStatus, SeriesKey};
use rtscope_model::store::Store;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use web::WebConfig;

/// The CPUs a watch takes its threads on, in words.
fn watched_cpus(w: &crate::watch::Settings) -> String {
    w.filter.cpus.as_deref().map_or_else(|| "any".to_string(), format_cpu_list)
}

/// How often the retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(60);

/// The live counters, fed by the probes' writer threads.
struct Live {
    exposition: Mutex<Exposition>,
    health: Mutex<Health>,
    /// Unix ns minus CLOCK_MONOTONIC ns, taken at the start.
    unix_offset_ns: i64,
    store_errors: AtomicU64,
    retention_errors: AtomicU64,
    /// Whether watched threads' wake-ups are explained (a cause threshold):
    /// their latency series then count episodes per cause class.
    causes: bool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Live {
    fn unix_s(&self, mono_ns: u64) -> f64 {
        (mono_ns as i64 + self.unix_offset_ns) as f64 / 1e9
    }
}

impl Tap for Live {
    fn series(&self, series_id: i64, key: &SeriesKey) {
        let mut e = lock(&self.exposition);
        let n = e.thresholds_ns.len();
        e.series.insert(series_id, SeriesCounters::new(key.clone(), n, self.unix_s(clock::now())));
    }

    fn committed(&self, series_id: i64, tally: &Tally, missed: u64, lost: u64, end_ns: u64) {
        let end = self.unix_s(end_ns);
        let mut e = lock(&self.exposition);
        let thresholds = e.thresholds_ns.clone();
        if let Some(s) = e.series.get_mut(&series_id) {
            s.add(tally, &thresholds, missed, lost, end);
        }
    }

    fn store_failed(&self) {
        self.store_errors.fetch_add(1, Relaxed);
    }

    fn thread(&self, series_id: i64, key: &SeriesKey, tid: i32, comm: &str) {
        let mut e = lock(&self.exposition);
        let n = e.thresholds_ns.len();
        let mut c = SeriesCounters::new(key.clone(), n, self.unix_s(clock::now()));
        c.thread = Some((tid, comm.to_string()));
        if self.causes && key.metric == crate::watch::METRICS[0] {
            c.episodes = Some(CauseKind::ALL.iter().map(|&k| (k, 0)).collect());
        }
        e.series.insert(series_id, c);
    }

    fn explained(&self, series_id: i64) {
        if let Some(s) = lock(&self.exposition).series.get_mut(&series_id) {
            s.episodes = Some(CauseKind::ALL.iter().map(|&k| (k, 0)).collect());
        }
    }

    fn episode(&self, series_id: i64, kind: CauseKind) {
        let mut e = lock(&self.exposition);
        if let Some(n) = e.series.get_mut(&series_id).and_then(|s| s.episodes.as_mut()?.get_mut(&kind)) {
            *n += 1;
        }
    }

    /// A watched thread's series leave the page with it (Prometheus marks
    /// them stale); a probe's stay until the monitor stops.
    fn ended(&self, series_id: i64) {
        let mut e = lock(&self.exposition);
        if e.series.get(&series_id).is_some_and(|s| s.thread.is_some()) {
            e.series.remove(&series_id);
        }
    }
}

/// One scrape's answer: the page in the format the `Accept` header prefers.
fn page(live: &Live, accept: Option<&str>) -> (Vec<u8>, Format) {
    let format = Format::negotiate(accept);
    let mut h = lock(&live.health);
    h.scrapes += 1;
    h.cpu_seconds = clock::process_cpu_ns() as f64 / 1e9;
    h.resident_bytes = mem::resident_bytes().unwrap_or(0);
    h.store_errors = live.store_errors.load(Relaxed) + live.retention_errors.load(Relaxed);
    let health = h.clone();
    drop(h);
    (lock(&live.exposition).render(&health, format), format)
}

const INDEX: &str = "rtscope monitor: latency metrics at /metrics (Prometheus text format or OpenMetrics)\n";

/// What `/metrics` and `/` answer a request that passed the edge
/// (`http`: its limits, TLS and basic auth).
fn answer(live: &Live, req: &http::request::Request) -> http::Answer {
    use http::request::Method;
    if req.method == Method::Other {
        let mut a = http::Answer::text(405, "only GET and HEAD are served\n");
        a.headers.push(("Allow", "GET, HEAD"));
        return a;
    }
    match req.path.as_str() {
        "/metrics" => {
            let (body, format) = page(live, req.accept.as_deref());
            http::Answer { status: 200, content_type: format.content_type(), body, headers: Vec::new() }
        }
        "/" => http::Answer::text(200, INDEX),
        _ => http::Answer::text(404, "not found: the metrics are at /metrics\n"),
    }
}

/// One retention pass: stores the chunks of the spans of raw intervals
/// complete since the last ([`Store::store_chunks`]), summarises what is
/// older than `--retain`, then,
/// while the store is over `--max-store`, what is older than half the time
/// kept, down to one summary span; past that, whole days. Returns the
/// store's size after it.
fn retention(store: &mut Store, plan: &MonitorPlan, h: &Mutex<Health>) -> Result<u64> {
    retention_at(store, plan, h, clock::now_unix().max(0) as u64)
}

/// [`retention`] at `now` (Unix ns): the monitor's clock, or an accelerated
/// one's (`accelerated`).
fn retention_at(store: &mut Store, plan: &MonitorPlan, h: &Mutex<Health>, now: u64) -> Result<u64> {
    // The sums of each complete --summary-span of raw intervals, for the
    // reads (the first pass on an older store writes those of every span).
    store.store_chunks("monitor", plan.span_ns)?;
    let mut keep = plan.retain_ns;
    let mut span = plan.span_ns;
    loop {
        let done = store.summarise("monitor", now.saturating_sub(keep), span)?;
        {
            let mut h = lock(h);
            h.summarised_intervals += done.intervals;
            h.thinned_exceedances += done.exceedances;
        }
        let used = store.used_bytes()?;
        if used <= plan.max_store {
            return Ok(used);
        }
        if keep > plan.span_ns {
            keep = (keep / 2).max(plan.span_ns);
        } else if span < 86_400_000_000_000 {
            span = 86_400_000_000_000;
        } else {
            return Ok(used);
        }
    }
}

/// A probe measured until `signal`, as one run of its own.
fn measure(
    probe: &dyn Probe,
    common: &Common,
    tap: Arc<dyn Tap>,
    signal: &Arc<AtomicBool>,
    quiet: bool,
) -> Result<(i64, RunStatus, Vec<String>)> {
    let mut session = Session::open(&common.db, &common.cpus, common.dma_latency)?;
    let effective = session.effective(common.policy, common.priority);
    let mut cell = Cell::prepare(probe, common, effective, None, &mut session.warnings)?;
    if !quiet {
        session.print_warnings();
    }
    cell.set_tap(tap);
    let mut plan = cell.plan();
    plan["housekeeping_cpus"] = session.pin_housekeeping(&common.cpus).into();
    let mut run = session.create(&common.kind, &plan)?;
    let run_id = run.run_id;
    let mut outcomes = [cell.measure(&mut run, signal)?];
    let errors = outcomes[0].errors.clone();
    let (status, exit_code, notes) = verdict(&mut outcomes, signal);
    run.finish(status, exit_code, &notes)?;
    if let Some(e) = outcomes[0].store_error.take() {
        return Err(e.context(format!("run {run_id} ended failed")));
    }
    Ok((run_id, status, errors))
}

/// The watched threads (`--watch`) until `signal`, as one run of their own.
fn watch(
    settings: &crate::watch::Settings,
    db: &std::path::Path,
    tap: Arc<dyn Tap>,
    signal: &Arc<AtomicBool>,
    quiet: bool,
) -> Result<(i64, RunStatus, Vec<String>)> {
    let mut session = Session::open(db, &[], None)?;
    let w = crate::watch::prepare(settings.clone(), &mut session.warnings)?;
    if !quiet {
        session.print_warnings();
    }
    let plan = w.plan();
    let mut run = session.create("monitor", &plan)?;
    let run_id = run.run_id;
    let mut outcomes = [w.measure(&mut run, None, signal, Some(tap))?];
    let (status, exit_code, notes) = verdict(&mut outcomes, signal);
    run.finish(status, exit_code, &notes)?;
    if let Some(e) = outcomes[0].store_error.take() {
        return Err(e.context(format!("run {run_id} ended failed")));
    }
    Ok((run_id, status, outcomes[0].errors.clone()))
}

/// `rtscope monitor`.
pub fn main(args: MonitorArgs, signal: &Arc<AtomicBool>) -> Result<i32> {
    let plan = args.resolve()?;
    // A service: a tracer started while it runs keeps its task names.
    crate::sys::tracefs::leave_record_cmd();
    pin_housekeeping(&plan);
    let web = plan.web_config.as_deref().map(WebConfig::load).transpose()?;
    // Bound before anything is measured: a port in use is said at once.
    let scheme = if web.as_ref().is_some_and(|w| w.tls.is_some()) { "https" } else { "http" };
    let server = bind(&plan, web)?;
    // The retention's store first: a bad --db is said before any probe starts.
    let mut store = Store::open(&plan.db)?;
    let live = Arc::new(Live::new(&plan));
    if !plan.quiet {
        announce(&plan, scheme, server.local_addr().unwrap_or(plan.listen));
    }
    let stop_serving = AtomicBool::new(false);
    let ended = std::thread::scope(|scope| -> Result<Vec<String>> {
        let server_thread = std::thread::Builder::new()
            .name("rtscope-http".into())
            .spawn_scoped(scope, || server.serve(&|req| answer(&live, req), &stop_serving))
            .context("starting the metrics server")?;
        let mut probes = Vec::new();
        for (common, probe) in &plan.probes {
            let tap: Arc<dyn Tap> = live.clone();
            let t = std::thread::Builder::new()
                .name(format!("rtscope-mon-{}", probe.name()))
                .spawn_scoped(scope, move || measure(probe.as_ref(), common, tap, signal, plan.quiet))
                .context("starting a probe")?;
            probes.push(t);
        }
        if let Some(settings) = &plan.watch {
            let tap: Arc<dyn Tap> = live.clone();
            let (db, quiet) = (&plan.db, plan.quiet);
            let t = std::thread::Builder::new()
                .name("rtscope-mon-watch".into())
                .spawn_scoped(scope, move || watch(settings, db, tap, signal, quiet))
                .context("starting the watch")?;
            probes.push(t);
        }
        supervise(&probes, (&mut store, &plan), &live, signal);
        // Without --duration, a probe that ended on its own ends the
        // monitor (a service manager restarts it): the others stop too.
        signal.store(true, Relaxed);
        let errors = join_runs(probes, plan.quiet);
        stop_serving.store(true, Relaxed);
        let _ = server_thread.join();
        Ok(errors)
    })?;
    if !ended.is_empty() {
        return Err(anyhow!("{}", ended.join("; ")));
    }
    Ok(0)
}

/// Pins this thread, and so the HTTP server's and the probes' own threads
/// (their writers), off the measured CPUs and their SMT siblings.
fn pin_housekeeping(plan: &MonitorPlan) {
    let mut measured: Vec<usize> = plan.probes.iter().flat_map(|(c, _)| c.cpus.iter().copied()).collect();
    measured.sort_unstable();
    measured.dedup();
    cpu::pin_housekeeping(&measured, &cpu::siblings());
}

/// The metrics server on `--listen`, with `--web-config`'s TLS and users
/// if it has any.
fn bind(plan: &MonitorPlan, web: Option<WebConfig>) -> Result<http::Server> {
    let (tls, users) = web.map_or((None, Default::default()), |w| (w.tls, w.users));
    let tls_said = if tls.is_some() { " with --web-config's TLS" } else { "" };
    http::Server::bind(plan.listen, tls, users).map_err(|e| {
        anyhow!("--listen {}{tls_said}: cannot listen there: {e} (pick another address or port)", plan.listen)
    })
}

impl Live {
    /// The counters of `plan`, empty, and its health: what it measures,
    /// from when, the store's limit.
    fn new(plan: &MonitorPlan) -> Live {
        Live {
            exposition: Mutex::new(Exposition::new(plan.thresholds_ns.clone())),
            health: Mutex::new(Health {
                version: env!("CARGO_PKG_VERSION").into(),
                probes: plan
                    .probes
                    .iter()
                    .map(|(c, p)| (p.name().to_string(), format_cpu_list(&c.cpus), p.describe()))
                    .chain(plan.watch.iter().map(|w| (crate::watch::NAME.to_string(), watched_cpus(w), w.describe())))
                    .collect(),
                start_time_s: clock::now_unix() as f64 / 1e9,
                store_limit_bytes: plan.max_store,
                ..Default::default()
            }),
            unix_offset_ns: clock::now_unix() - clock::now() as i64,
            store_errors: AtomicU64::new(0),
            retention_errors: AtomicU64::new(0),
            causes: plan.watch.as_ref().is_some_and(|w| w.cause_threshold_ns.is_some()),
        }
    }
}

/// What the monitor measures, where it serves and how it keeps its store,
/// on stderr.
fn announce(plan: &MonitorPlan, scheme: &str, listening: std::net::SocketAddr) {
    for (c, p) in &plan.probes {
        eprintln!("rtscope monitor: {} on CPUs {}: {}", p.name(), format_cpu_list(&c.cpus), p.describe());
    }
    if let Some(w) = &plan.watch {
        eprintln!("rtscope monitor: watch on CPUs {}: {}", watched_cpus(w), w.describe());
    }
    eprintln!(
        "rtscope monitor: metrics on {scheme}://{}/metrics; store {}, checkpoint every {}, kept {} then summarised \
         per {}, at most {} MiB",
        listening,
        plan.db.display(),
        rtscope_model::units::human(plan.checkpoint_ns),
        rtscope_model::units::human(plan.retain_ns),
        rtscope_model::units::human(plan.span_ns),
        plan.max_store >> 20
    );
}

/// A probe's (or the watch's) run in the monitor: its id, status and
/// errors.
type MonitorRun<'scope> = std::thread::ScopedJoinHandle<'scope, Result<(i64, RunStatus, Vec<String>)>>;

/// While every run goes on (with --duration: while any does, each ending
/// by itself) and no signal came: the health's count of running probes,
/// and a retention pass every [`RETENTION_EVERY`].
fn supervise(probes: &[MonitorRun<'_>], (store, plan): (&mut Store, &MonitorPlan), live: &Live, signal: &AtomicBool) {
    let mut next_retention = Instant::now();
    let going = |t: &MonitorRun<'_>| !t.is_finished();
    let all_going = || if plan.duration_ns.is_some() { probes.iter().any(going) } else { probes.iter().all(going) };
    while !signal.load(Relaxed) && all_going() {
        lock(&live.health).probes_running = probes.iter().filter(|t| !t.is_finished()).count() as u64;
        if Instant::now() >= next_retention {
            next_retention = Instant::now() + RETENTION_EVERY;
            match retention(store, plan, &live.health) {
                Ok(used) => lock(&live.health).store_bytes = used,
                Err(e) => {
                    live.retention_errors.fetch_add(1, Relaxed);
                    eprintln!("rtscope monitor: the retention failed: {e:#}");
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Joins the runs, saying each one stored (unless `quiet`); returns their
/// errors.
fn join_runs(probes: Vec<MonitorRun<'_>>, quiet: bool) -> Vec<String> {
    let mut errors = Vec::new();
    for t in probes {
        match t.join() {
            Ok(Ok((run_id, status, errs))) => {
                if !quiet {
                    eprintln!("rtscope monitor: run {run_id} stored ({})", status.as_str());
                }
                errors.extend(errs);
            }
            Ok(Err(e)) => errors.push(format!("{e:#}")),
            Err(_) => errors.push("a probe's thread panicked".into()),
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtscope_model::run::{Exceedance, Interval};

    /// Ten days of 10-minute intervals in a store four times over its
    /// limit: the retention summarises younger intervals until it fits,
    /// and every sample, maximum and missed period is still there.
    #[test]
    fn over_max_store_younger_intervals_are_summarised_and_nothing_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        let mut store = Store::open(&db).unwrap();
        let minute = 60_000_000_000u64;
        let mut header = crate::session::new_header("monitor", vec![], true, vec![]);
        header.started_unix_ns = clock::now_unix() - (10 * 24 * 60 * minute) as i64;
        header.start_mono_ns = 1_000;
        let run = store.create_run(&header, &Default::default(), &serde_json::Value::Null).unwrap();
        let sid = store.add_series(run, &SeriesKey::new("wakeup", "latency", 0), "ns", "x").unwrap();
        for k in 0..(10 * 24 * 6) as u64 {
            let mut t = Tally::new();
            let mut exc = Vec::new();
            for v in 0..200u64 {
                let value = 1_000 + (v * 7919 + k * 104_729) % 90_000;
                t.record(value);
                if value > 88_000 {
                    exc.push(Exceedance { t_ns: 1_000 + k * 10 * minute + v, value_ns: value });
                }
            }
            let iv = Interval::new(k as u32, 1_000 + k * 10 * minute, 1_000 + (k + 1) * 10 * minute, &t, k % 3, 0);
            store.commit_checkpoint(&[(sid, &iv)], &[(sid, &exc)]).unwrap();
        }
        let before = store.load_run(run).unwrap();
        let used = store.used_bytes().unwrap();
        let plan = MonitorPlan {
            probes: Vec::new(),
            watch: None,
            listen: "127.0.0.1:0".parse().unwrap(),
            web_config: None,
            checkpoint_ns: minute,
            retain_ns: 30 * 24 * 60 * minute,
            span_ns: 60 * minute,
            max_store: used / 4,
            thresholds_ns: vec![],
            duration_ns: None,
            db: db.clone(),
            quiet: true,
        };
        let health = Mutex::new(Health::default());
        let after_bytes = retention(&mut store, &plan, &health).unwrap();
        assert!(after_bytes <= plan.max_store, "{after_bytes} bytes above {}", plan.max_store);
        let after = store.load_run(run).unwrap();
        let (b, a) = (&before.series[0], &after.series[0]);
        assert!(a.intervals.len() < b.intervals.len() / 4, "{} intervals left", a.intervals.len());
        assert_eq!(a.total().stats, b.total().stats);
        assert_eq!(a.total().hist, b.total().hist);
        assert_eq!(a.overruns(), b.overruns());
        let h = lock(&health);
        assert_eq!(h.summarised_intervals, (b.intervals.len() - a.intervals.len()) as u64);
        assert_eq!(h.thinned_exceedances, (b.exceedances.len() - a.exceedances.len()) as u64);
    }
}
