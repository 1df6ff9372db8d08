//! The fleet's data, read back in a handful of queries over every machine
//! at once (the monitors' series, then one range query per family: the
//! histograms' buckets, classic and native, the interval maxima and how
//! many were scraped, the checkpoints, missed periods and lost
//! exceedances), folded per machine and series into a grid of steps as
//! each answer is read, and made one run per machine when it is taken.
//!
//! A counter's count in a step is the difference of its values at the
//! step's two ends (read as they are, the difference taken here: exact,
//! whatever the scrape interval, and cheap for Prometheus, where `X - X
//! offset STEP` costs it a label match per series and step). `increase()`
//! over a step of one scrape interval sees one sample and gives nothing,
//! and over longer steps it drops what was counted between the last scrape
//! of a step and the first of the next (a worst case there, gone) and
//! extrapolates the rest. A step whose counter went down (the monitor
//! restarted) gives nothing. Native histograms are still read with
//! `increase()`.

use super::Client;
use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::metrics::query::{self, Bucket, PromSeries, Step};
use rtscope_model::metrics::{families, names};
use rtscope_model::run::{Run, Series, SeriesKey};
use std::collections::{BTreeMap, BTreeSet};

/// The time span read: `[start_s, end_s]` (Unix seconds) in steps of `step_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub start_s: f64,
    pub end_s: f64,
    pub step_s: f64,
}

impl Window {
    /// The end of the first step.
    fn first_end(&self) -> f64 {
        (self.start_s + self.step_s).min(self.end_s)
    }

    /// How many steps end in the window.
    fn steps(&self) -> usize {
        ((self.end_s - self.first_end()) / self.step_s + 1e-6).floor().max(0.0) as usize + 1
    }

    /// The step that ends at `t` (Unix seconds), if one does.
    fn index(&self, t: f64) -> Option<usize> {
        let i = ((t - self.first_end()) / self.step_s).round();
        (i >= 0.0 && (i as usize) < self.steps()).then_some(i as usize)
    }

    fn end_of(&self, i: usize) -> f64 {
        self.first_end() + i as f64 * self.step_s
    }
}

/// A classic bucket's bound (`le`, s) and its count per step.
type Cumulative = (f64, Vec<f64>);

/// One series' data per step: the buckets (empty where it measured
/// nothing), the largest interval maximum scraped (s, NaN where none), the
/// missed periods and lost exceedances.
struct Steps {
    buckets: Vec<Vec<Bucket>>,
    max_s: Vec<f64>,
    missed: Vec<f64>,
    lost: Vec<f64>,
}

impl Steps {
    fn new(n: usize) -> Steps {
        Steps { buckets: vec![Vec::new(); n], max_s: vec![f64::NAN; n], missed: vec![0.0; n], lost: vec![0.0; n] }
    }
}

/// What the fleet's data is, as read from Prometheus: per machine
/// (`instance`) and series, its steps.
pub struct Fleet {
    machines: BTreeMap<String, BTreeMap<SeriesKey, Steps>>,
    window: Window,
    plan: serde_json::Value,
    /// The machines' series whose histograms were native (the others' classic).
    pub native: usize,
    pub classic: usize,
    /// Interval maxima scraped, and checkpoint intervals committed, in the window (all machines).
    pub maxima_scraped: u64,
    pub checkpoints: u64,
    /// The machines' series read as native histograms.
    native_keys: BTreeSet<(String, SeriesKey)>,
}

impl Fleet {
    /// The range and the steps read.
    pub fn window(&self) -> Window {
        self.window
    }

    /// How many machines.
    pub fn len(&self) -> usize {
        self.machines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.machines.is_empty()
    }

    /// The machines' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.machines.keys().cloned().collect()
    }

    /// Each machine's data (kind `monitor`, named by its `instance`), in the
    /// order of their names, to be made a run when it is taken
    /// ([`Machine::run`]): a run keeps each series' whole histogram
    /// (230 kB), too much for a fleet's at once.
    pub fn machines(self) -> Vec<Machine> {
        let (window, plan) = (self.window, self.plan);
        self.machines
            .into_iter()
            .map(|(instance, keys)| Machine { instance, keys, window, plan: plan.clone() })
            .collect()
    }

    /// The machines' runs, one at a time (see [`Fleet::machines`]).
    pub fn runs(self) -> impl Iterator<Item = Result<Run>> {
        self.machines().into_iter().map(Machine::run)
    }

    fn steps(&mut self, labels: &query::Labels) -> Option<&mut Steps> {
        let (instance, key) = query::key_of(labels)?;
        let n = self.window.steps();
        Some(self.machines.entry(instance).or_default().entry(key).or_insert_with(|| Steps::new(n)))
    }

    /// Adds each value of `series` to its step's figure `at`, or keeps the
    /// larger when `max`; returns the sum of the values.
    fn fold(&mut self, series: Vec<PromSeries>, at: fn(&mut Steps) -> &mut Vec<f64>, max: bool) -> f64 {
        let w = self.window;
        let mut sum = 0.0;
        for s in series {
            let Some(steps) = self.steps(&s.labels) else { continue };
            let figure = at(steps);
            for (t, v) in s.values {
                let Some(i) = w.index(t).filter(|_| v.is_finite()) else { continue };
                let f = &mut figure[i];
                *f = if !max {
                    *f + v
                } else if f.is_nan() {
                    v
                } else {
                    f.max(v)
                };
                sum += v;
            }
        }
        sum
    }

    /// The classic buckets: per series and step, each bucket's own count
    /// from the cumulative counts per `le`.
    fn classic(&mut self, series: Vec<PromSeries>) {
        let w = self.window;
        let n = w.steps();
        let mut cumulative: BTreeMap<(String, SeriesKey), Vec<Cumulative>> = BTreeMap::new();
        for s in series {
            let (Some(k), Some(le)) = (query::key_of(&s.labels), s.labels.get("le")) else { continue };
            let Ok(le) = le.parse::<f64>().or_else(|_| if le == "+Inf" { Ok(f64::INFINITY) } else { Err(()) }) else {
                continue;
            };
            let mut counts = vec![0.0; n];
            for (t, v) in s.values {
                if let Some(i) = w.index(t) {
                    counts[i] += v;
                }
            }
            // A series kept under two names (the same values before and
            // after a family's rename): their counts add up.
            let les = cumulative.entry(k).or_default();
            match les.iter_mut().find(|(l, _)| *l == le) {
                Some((_, c)) => c.iter_mut().zip(&counts).for_each(|(a, b)| *a += b),
                None => les.push((le, counts)),
            }
        }
        for ((instance, key), les) in cumulative {
            self.classic += 1;
            let steps = self.machines.entry(instance).or_default().entry(key).or_insert_with(|| Steps::new(n));
            let mut at = Vec::with_capacity(les.len());
            for (i, b) in steps.buckets.iter_mut().enumerate() {
                at.clear();
                at.extend(les.iter().map(|(le, c)| (*le, c[i])));
                *b = query::classic_buckets(&at);
            }
        }
    }

    /// The native histograms, in place of the classic buckets of the same series.
    fn native(&mut self, series: Vec<PromSeries>) {
        let w = self.window;
        for s in series {
            if s.histograms.is_empty() {
                continue;
            }
            let Some(key) = query::key_of(&s.labels) else { continue };
            let first = self.native_keys.insert(key);
            let Some(steps) = self.steps(&s.labels) else { continue };
            let had_classic = first && steps.buckets.iter().any(|b| !b.is_empty());
            if first {
                steps.buckets.iter_mut().for_each(Vec::clear);
            }
            // A series kept under two names (before and after a family's
            // rename): the buckets of both.
            for (t, h) in &s.histograms {
                if let Some(i) = w.index(*t) {
                    steps.buckets[i].extend(query::native_buckets(h));
                }
            }
            if first {
                self.native += 1;
            }
            if had_classic {
                self.classic -= 1;
            }
        }
    }
}

/// One machine's data, read.
pub struct Machine {
    instance: String,
    keys: BTreeMap<SeriesKey, Steps>,
    window: Window,
    plan: serde_json::Value,
}

impl Machine {
    /// The machine's run.
    pub fn run(self) -> Result<Run> {
        let (w, instance) = (self.window, self.instance);
        let series = self
            .keys
            .into_iter()
            .map(|(key, steps)| series_of(&instance, key, steps, &w))
            .collect::<Result<Vec<Series>>>()?;
        Ok(query::machine_run(&instance, w.start_s, w.end_s, series, self.plan))
    }
}

/// A series rebuilt from its steps: the histograms, the interval maxima,
/// and the missed periods and lost exceedances of each step that measured
/// something.
fn series_of(instance: &str, key: SeriesKey, s: Steps, w: &Window) -> Result<Series> {
    let Steps { buckets, max_s, missed, lost } = s;
    let counted: Vec<(u64, u64)> = (0..buckets.len())
        .filter(|&i| buckets[i].iter().any(|b| b.count > 0))
        .map(|i| (missed[i].max(0.0).round() as u64, lost[i].max(0.0).round() as u64))
        .collect();
    let steps: Vec<Step> = buckets
        .into_iter()
        .enumerate()
        .map(|(i, b)| Step {
            end_s: w.end_of(i),
            buckets: b,
            max_ns: Some(max_s[i]).filter(|m| !m.is_nan()).map(|m| (m * 1e9).round() as i64),
        })
        .collect();
    let mut series = query::series_of(key.clone(), &steps, w.step_s)
        .map_err(|e| anyhow!("{} of {instance}: {e}", key.describe()))?;
    for (iv, (m, l)) in series.intervals.iter_mut().zip(counted) {
        (iv.overruns, iv.lost_exceedances) = (m, l);
    }
    Ok(series)
}

/// Per series, the count in each step of `w` from a counter's values at
/// the steps' ends (`values` read from the window's start, a step apart):
/// each difference at the end of its step; none where a value is missing
/// or went down (a restart).
fn per_step(series: Vec<PromSeries>, w: &Window) -> Vec<PromSeries> {
    series
        .into_iter()
        .map(|mut s| {
            let at = |t: f64| ((t - w.start_s) / w.step_s).round() as i64;
            let mut out = Vec::with_capacity(s.values.len());
            for pair in s.values.windows(2) {
                let ((t0, v0), (t1, v1)) = (pair[0], pair[1]);
                if at(t1) == at(t0) + 1 && v1 >= v0 {
                    out.push((t1, v1 - v0));
                }
            }
            s.values = out;
            s
        })
        .collect()
}

/// Reads the monitors' series that `matchers` (a selector's inside) picks
/// in `w` from Prometheus; in steps of `coarse_s` instead where it is
/// given and no series is a native histogram (whose tail fit wants many
/// steps): the report shows each series' figures over the whole range,
/// and Prometheus' work on the classic buckets grows with the steps.
///
/// Each kind of value has its own families ([`families`]); the buckets
/// of all are read in one query, the functions (`increase`,
/// `max_over_time`, `count_over_time`) one family at a time, those that
/// hold series in the range only, so that a series kept under two names
/// (a family renamed while Prometheus kept its data) comes back twice
/// rather than failing the query, and is read as one.
pub fn fetch(c: &Client, selector: &str, matchers: &str, w: &Window, coarse_s: Option<f64>) -> Result<Fleet> {
    let name = |n: &str| query::with_name(n, matchers);
    let span = rtscope_model::units::human((w.end_s - w.start_s).max(0.0) as u64 * 1_000_000_000);
    let at = rtscope_model::units::utc((w.end_s * 1e9) as i64);
    let found = monitors(c, selector, matchers, w, (&span, &at))?;
    let context = || format!("reading {span} up to {at}");
    // Which families hold series in the range: their names, native or classic (`_count`).
    let held = c
        .label_values(
            "__name__",
            &[
                families::selector(families::all_names(|v| v.histogram, ""), matchers),
                families::selector(families::all_names(|v| v.histogram, "_count"), matchers),
            ],
            w.start_s,
            w.end_s,
        )
        .with_context(context)?;
    let present: Vec<&families::Values> = families::ALL
        .iter()
        .filter(|v| held.iter().any(|n| n == v.histogram || *n == format!("{}_count", v.histogram)))
        .collect();
    let native_held: Vec<&families::Values> =
        present.iter().copied().filter(|v| held.iter().any(|n| n == v.histogram)).collect();
    let fine = *w;
    let native = native_held
        .iter()
        .map(|v| {
            let s = format!("{}s", fine.step_s.round() as u64);
            c.query_range(&format!("increase({}[{s}])", name(v.histogram)), fine.first_end(), fine.end_s, fine.step_s)
                .with_context(context)
        })
        .collect::<Result<Vec<_>>>()?;
    let any_native = native.iter().any(|a| a.iter().any(|s| !s.histograms.is_empty()));
    let w = match coarse_s {
        Some(step_s) if !any_native && step_s > w.step_s => Window { step_s: step_s.min(w.end_s - w.start_s), ..*w },
        _ => *w,
    };
    let range = |q: String| -> Result<Vec<PromSeries>> {
        c.query_range(&q, w.first_end(), w.end_s, w.step_s).with_context(context)
    };
    // A counter's values at the steps' ends, the window's start included.
    let counts = |q: String| -> Result<Vec<PromSeries>> {
        Ok(per_step(c.query_range(&q, w.start_s, w.end_s, w.step_s).with_context(context)?, &w))
    };
    let s = format!("{}s", w.step_s.round() as u64);
    let plan = serde_json::json!({
        "source": "prometheus",
        "url": c.url,
        "selector": selector,
        "start_unix_s": w.start_s,
        "end_unix_s": w.end_s,
        "step_s": w.step_s,
    });
    let mut fleet = Fleet {
        machines: BTreeMap::new(),
        window: w,
        plan,
        native: 0,
        classic: 0,
        maxima_scraped: 0,
        checkpoints: 0,
        native_keys: BTreeSet::new(),
    };
    if !present.is_empty() {
        let buckets = present.iter().map(|v| names::bucket(v.histogram));
        fleet.classic(counts(families::selector(buckets, matchers))?);
    }
    if w == fine {
        for answer in native {
            fleet.native(answer);
        }
    }
    for v in &present {
        fleet.fold(range(format!("max_over_time({}[{s}])", name(v.interval_max)))?, |s| &mut s.max_s, true);
        let scraped = range(format!("count_over_time({}[{s}])", name(v.interval_max)))?;
        fleet.maxima_scraped += scraped.iter().flat_map(|s| &s.values).map(|v| v.1.round() as u64).sum::<u64>();
    }
    fleet.fold(counts(name(&names::total(names::MISSED_PERIODS)))?, |s| &mut s.missed, false);
    fleet.fold(counts(name(&names::total(names::LOST_EXCEEDANCES)))?, |s| &mut s.lost, false);
    let checkpoints = counts(name(&names::total(names::CHECKPOINTS)))?;
    fleet.checkpoints = checkpoints.iter().flat_map(|s| &s.values).map(|v| v.1.max(0.0).round() as u64).sum();
    for l in &found {
        fleet.machines.entry(l.get("instance").cloned().unwrap_or_default()).or_default();
    }
    Ok(fleet)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_give_each_steps_difference_none_where_they_went_down() {
        let w = Window { start_s: 100.0, end_s: 140.0, step_s: 10.0 };
        let s = series(&[], &[(100.0, 5.0), (110.0, 8.0), (120.0, 8.0), (130.0, 2.0), (140.0, 6.0)]);
        assert_eq!(per_step(vec![s], &w)[0].values, [(110.0, 3.0), (120.0, 0.0), (140.0, 4.0)]);
        // A missing value: no difference across it.
        let s = series(&[], &[(100.0, 5.0), (120.0, 8.0), (130.0, 9.0)]);
        assert_eq!(per_step(vec![s], &w)[0].values, [(130.0, 1.0)]);
    }

    #[test]
    fn steps_are_indexed_by_their_end() {
        let w = Window { start_s: 1000.0, end_s: 1060.0, step_s: 20.0 };
        assert_eq!(w.steps(), 3);
        assert_eq!(
            (w.index(1020.0), w.index(1060.0), w.index(1080.0), w.index(1000.0)),
            (Some(0), Some(2), None, None)
        );
        assert_eq!(w.end_of(2), 1060.0);
        // A range shorter than a step: one step, at its end.
        let w = Window { start_s: 1000.0, end_s: 1005.0, step_s: 20.0 };
        assert_eq!((w.steps(), w.index(1005.0)), (1, Some(0)));
    }

    fn series(labels: &[(&str, &str)], values: &[(f64, f64)]) -> PromSeries {
        PromSeries {
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            values: values.to_vec(),
            histograms: vec![],
        }
    }

    /// Classic buckets, maxima and counters fold into each machine's
    /// steps; a run per machine, in the order of their names.
    #[test]
    fn answers_fold_into_each_machines_steps() {
        let w = Window { start_s: 0.0, end_s: 20.0, step_s: 10.0 };
        let mut f = Fleet {
            machines: BTreeMap::new(),
            window: w,
            plan: serde_json::Value::Null,
            native: 0,
            classic: 0,
            maxima_scraped: 0,
            checkpoints: 0,
            native_keys: BTreeSet::new(),
        };
        let l = |inst: &'static str, le: &'static str| {
            vec![("instance", inst), ("probe", "wakeup"), ("metric", "latency"), ("cpu", "0"), ("le", le)]
        };
        f.classic(vec![
            series(&l("b:1", "0.00001"), &[(10.0, 90.0), (20.0, 100.0)]),
            series(&l("b:1", "+Inf"), &[(10.0, 100.0), (20.0, 100.0)]),
            series(&l("a:1", "+Inf"), &[(20.0, 5.0)]),
        ]);
        assert_eq!(f.classic, 2);
        f.fold(vec![series(&l("b:1", ""), &[(10.0, 0.002), (20.0, 0.000_009)])], |s| &mut s.max_s, true);
        f.fold(vec![series(&l("b:1", ""), &[(10.0, 2.0)])], |s| &mut s.missed, false);
        let runs: Vec<Run> = f.runs().collect::<Result<_>>().unwrap();
        assert_eq!(runs.iter().map(|r| r.header.hostname.as_str()).collect::<Vec<_>>(), ["a:1", "b:1"]);
        let s = &runs[1].series[0];
        assert_eq!((s.intervals.len(), s.total().count(), s.overruns()), (2, 200, 2));
        // The step's maximum 2 ms places its +Inf-bound bucket's count.
        assert!((1_998_000..=2_002_000).contains(&s.intervals[0].stats.max), "{:?}", s.intervals[0].stats);
        assert!(s.intervals[1].stats.max <= 10_010, "{:?}", s.intervals[1].stats);
        assert_eq!(runs[0].series[0].total().count(), 5);
    }
}
