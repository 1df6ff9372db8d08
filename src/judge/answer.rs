//! The answer to "how real-time is this machine, under which load, and
//! why not better", decided once for a run and its verdicts: the overall
//! verdict and the requirement that decided it, the worst case and p99.9
//! of each probe under each load, the load that hurts most and its top
//! cause, the machine's settings that matter, and what to do next. The
//! terminal, the HTML and Markdown reports and the JSON (`summary`) render
//! it (`report/summary.rs`); nothing there decides.

use super::ReqSource;
use rtscope_model::analysis::pot::REFUSED;
use rtscope_model::analysis::verdict::{self, Status, Verdict};
use rtscope_model::characterisation::Characterisation;
use rtscope_model::descriptor;
use rtscope_model::episode::top_causes;
use rtscope_model::run::{IDLE_LOAD, Run, Series, SeriesKey, farthest, pooled};
use rtscope_model::units;
use serde::Serialize;

/// A p99.9 with fewer samples above it than this reads as the maximum
/// (the analysis' rule for every percentile).
const THIN_ABOVE: f64 = 10.0;

/// The summary of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The verdict on the requirements asked, or on the yardstick; absent
    /// when nothing was judged (`--profile none`, or no data for it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<VerdictSummary>,
    /// The columns: the loads in the plan's order; one empty name for a
    /// run without loads.
    pub loads: Vec<String>,
    /// A row per probe: its worst metric under each load.
    pub rows: Vec<SummaryRow>,
    /// The load under which the first row (wake-up latency where measured)
    /// was worst, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_load: Option<WorstLoad>,
    /// The machine's settings that decide its latency.
    pub machine: MachineSummary,
    /// What to do next, most useful first.
    pub next: Vec<String>,
}

/// The verdict in one line.
#[derive(Clone, Debug, Serialize)]
pub struct VerdictSummary {
    /// pass, fail or not_enough_data.
    pub outcome: Status,
    /// What was judged: "the profile omac".
    pub against: String,
    /// Where it comes from: flags, stored, or default (the yardstick).
    pub from: ReqSource,
    /// Whether it decides the exit code (the yardstick never does).
    pub gates: bool,
    /// "1 of 2 requirements failed; 1 passed".
    pub counts: String,
    /// The requirement that decided (the first failed, else the first
    /// without enough data), with its evidence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// How long to measure for the requirements without enough data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measure_for: Option<String>,
    /// What to measure for the requirements that judge series the run
    /// lacks (a probe it did not run): "a run of `rtscope ptimer --period
    /// 1ms` ...", one per requirement.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub measure_runs: Vec<String>,
    /// The series the deciding requirement is about, as measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<VerdictSeries>,
}

/// The series a verdict is about: its worst case and p99.9 as measured.
#[derive(Clone, Debug, Serialize)]
pub struct VerdictSeries {
    /// `wakeup.latency CPU 0 [cpu]`, as the verdict names it.
    pub name: String,
    /// Its probe, metric, CPU and load (for a table to find its row).
    #[serde(skip)]
    pub key: rtscope_model::run::SeriesKey,
    /// The sample farthest from zero, with its sign.
    pub worst_ns: i64,
    pub p999_ns: i64,
    pub samples: u64,
}

/// A probe's row: its worst metric (the one with the sample farthest
/// from zero under any load; wake-up latency for wakeup) under each load.
#[derive(Clone, Debug, Serialize)]
pub struct SummaryRow {
    pub probe: String,
    pub metric: String,
    /// How many metrics the probe measured (the row shows the worst).
    pub metrics: usize,
    /// A cell per load, null where nothing was recorded.
    pub cells: Vec<Option<SummaryCell>>,
}

/// One probe metric under one load, every measured CPU together.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SummaryCell {
    /// The sample farthest from zero, with its sign.
    pub worst_ns: i64,
    pub p999_ns: i64,
    pub samples: u64,
    /// Fewer than 10 samples above the p99.9: read it as the maximum.
    pub p999_thin: bool,
}

/// The load that hurts most, and why.
#[derive(Clone, Debug, Serialize)]
pub struct WorstLoad {
    pub load: String,
    pub probe: String,
    pub metric: String,
    pub worst_ns: i64,
    /// The same row's worst case without a load (the `idle` column), when
    /// the run has one and it is not the worst.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_ns: Option<i64>,
    /// Its top cause, or what the kernel's counters say of the load.
    pub why: String,
    /// Where `why` comes from: trace (the cause episodes), counters (the
    /// characterisation) or none.
    pub why_from: &'static str,
}

/// The machine's settings that decide its latency.
#[derive(Clone, Debug, Serialize)]
pub struct MachineSummary {
    pub preemption: String,
    /// isolcpus / nohz_full, or "none".
    pub isolation: String,
    /// The hypervisor seen, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<String>,
    pub smt_active: Option<bool>,
    pub governor: String,
    pub rt_throttling: String,
    /// The tuning warnings of the run (notes aside).
    pub warnings: usize,
}

/// What the verdict is based on: where the requirements come from, what
/// they are, and their verdicts.
pub struct Judgement<'a> {
    pub from: ReqSource,
    pub against: String,
    pub verdicts: &'a [Verdict],
}

impl Summary {
    /// The summary of `run`, with the verdicts of `judged` (None: nothing judged).
    pub fn new(run: &Run, judged: Option<Judgement>) -> Summary {
        let matrix = run.is_matrix();
        let loads: Vec<Option<String>> = if matrix { run.loads().into_iter().map(Some).collect() } else { vec![None] };
        let rows = rows(run, &loads);
        let machine = machine(run);
        let verdict = judged.filter(|j| !j.verdicts.is_empty()).map(|j| verdict(run, j));
        let worst_load = worst_load(run, &loads, &rows);
        let mut s = Summary {
            verdict,
            loads: loads.iter().map(|l| l.clone().unwrap_or_default()).collect(),
            rows,
            worst_load,
            machine,
            next: Vec::new(),
        };
        s.next = next(run, &s);
        s
    }

    /// The summary of `run` judged against `asked` with `verdicts`
    /// (nothing judged when nothing was asked: `--profile none`).
    pub fn of(run: &Run, asked: &super::Asked, verdicts: &[Verdict]) -> Summary {
        let judgement =
            (!asked.reqs.is_empty()).then(|| Judgement { from: asked.source, against: asked.what(), verdicts });
        Summary::new(run, judgement)
    }

    /// The summary of `run` judged against the requirements stored with
    /// it, else the yardstick (`show`, a report of a stored run).
    pub fn as_stored(run: &Run) -> anyhow::Result<Summary> {
        let asked = super::asked(run, &super::RequireSpec::default(), true)?;
        let (verdicts, _) = super::judge(run, &asked, None);
        Ok(Summary::of(run, &asked, &verdicts))
    }

    /// The run's main series (the first row: wake-up latency where
    /// measured) and its worst case under any load.
    pub fn main_worst(&self) -> Option<(&SummaryRow, i64)> {
        let row = self.rows.first()?;
        let worst = row.cells.iter().flatten().map(|c| c.worst_ns).max_by_key(|w| w.unsigned_abs())?;
        Some((row, worst))
    }

    /// Whether it has anything measured to show.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// The verdicts counted in one line: "1 of 2 requirements failed; 1 passed".
pub fn counts(verdicts: &[Verdict]) -> String {
    let count = |s: Status| verdicts.iter().filter(|v| v.status == s).count();
    let (fail, none, pass) = (count(Status::Fail), count(Status::NotEnoughData), count(Status::Pass));
    let n = verdicts.len();
    let mut parts = Vec::new();
    if fail > 0 {
        parts.push(format!("{fail} of {n} requirement{} failed", if n > 1 { "s" } else { "" }));
    }
    if none > 0 {
        parts.push(format!("{none} {} not enough data", if none > 1 { "have" } else { "has" }));
    }
    if pass > 0 {
        parts.push(if pass == n { format!("all {n} passed") } else { format!("{pass} passed") });
    }
    parts.join("; ")
}

/// The verdict that decides: the first failed, else the first without
/// enough data.
fn deciding(vs: &[Verdict]) -> Option<&Verdict> {
    vs.iter().find(|v| v.status == Status::Fail).or_else(|| vs.iter().find(|v| v.status == Status::NotEnoughData))
}

fn verdict(run: &Run, j: Judgement) -> VerdictSummary {
    let vs = j.verdicts;
    let outcome = super::Asked::overall(vs);
    let counts = counts(vs);
    let decided = deciding(vs);
    let about = decided.or(vs.first()).and_then(|v| v.series.as_deref());
    let series = about.and_then(|name| {
        let s = run.series.iter().find(|s| verdict::series_name(&s.key) == name)?;
        let m = s.total().summary();
        Some(VerdictSeries {
            name: name.to_string(),
            key: s.key.clone(),
            worst_ns: farthest(m.min_ns, m.max_ns),
            p999_ns: m.p999_ns,
            samples: m.count,
        })
    });
    let decided_by = decided.map(|v| {
        format!("{}: {}{}", v.requirement, v.series.as_ref().map(|s| format!("{s}: ")).unwrap_or_default(), v.evidence)
    });
    // Too few samples of a series it has: measure longer; no series at
    // all: measure the probe that makes it.
    let short = |v: &&Verdict| v.status == Status::NotEnoughData;
    let measure_for = vs.iter().filter(short).filter(|v| v.series.is_some()).find_map(|v| v.measure_for.clone());
    let mut measure_runs: Vec<String> = Vec::new();
    for m in vs.iter().filter(short).filter(|v| v.series.is_none()).filter_map(|v| v.measure_for.clone()) {
        if !measure_runs.contains(&m) {
            measure_runs.push(m);
        }
    }
    VerdictSummary {
        outcome,
        against: j.against,
        from: j.from,
        gates: j.from != ReqSource::Default,
        counts,
        decided_by,
        measure_for,
        measure_runs,
        series,
    }
}

/// The order `analyze` shows a run's series in, most relevant first: the
/// series the deciding verdict is about, then those the other verdicts
/// are about, then the rest of the metrics the requirements judge, then
/// the others; each group in the probes' table's order (the summary's
/// rows), the run's order within a probe. Returns indices into `keys`.
pub fn by_relevance(keys: &[&SeriesKey], verdicts: &[Verdict]) -> Vec<usize> {
    let named: Vec<&str> = verdicts.iter().filter_map(|v| v.series.as_deref()).collect();
    let first = deciding(verdicts).or(verdicts.first()).and_then(|v| v.series.as_deref());
    // probe.metric of each judged series: "wakeup.latency CPU 0" -> "wakeup.latency".
    let judged: Vec<&str> = named.iter().filter_map(|n| n.split(' ').next()).collect();
    let group = |k: &SeriesKey| {
        let name = verdict::series_name(k);
        if Some(name.as_str()) == first {
            0
        } else if named.contains(&name.as_str()) {
            1
        } else if judged.contains(&format!("{}.{}", k.probe, k.metric).as_str()) {
            2
        } else {
            3
        }
    };
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| (group(keys[i]), descriptor::rank(&keys[i].probe)));
    order
}

/// The measured series of `probe` (trace stages aside).
pub fn of_probe<'a>(run: &'a Run, probe: &str) -> Vec<&'a Series> {
    run.series.iter().filter(|s| s.key.probe == probe && !rtscope_model::irqtime::from_trace(&s.key.metric)).collect()
}

/// A probe metric under one load, its CPUs together.
fn cell(list: &[&Series], metric: &str, load: &Option<String>) -> Option<SummaryCell> {
    let of: Vec<&Series> =
        list.iter().filter(|s| s.key.metric == metric && s.key.load.as_ref() == load.as_ref()).copied().collect();
    let t = pooled(&of)?;
    let m = t.summary();
    Some(SummaryCell {
        worst_ns: farthest(m.min_ns, m.max_ns),
        p999_ns: m.p999_ns,
        samples: m.count,
        p999_thin: (m.count as f64) * 0.001 < THIN_ABOVE,
    })
}

fn rows(run: &Run, loads: &[Option<String>]) -> Vec<SummaryRow> {
    let mut probes: Vec<&str> = Vec::new();
    for s in run.series.iter().filter(|s| !rtscope_model::irqtime::from_trace(&s.key.metric)) {
        if !probes.contains(&s.key.probe.as_str()) {
            probes.push(&s.key.probe);
        }
    }
    // The descriptor table's order (the matrix's), unknown probes last.
    probes.sort_by_key(|p| descriptor::rank(p));
    probes
        .into_iter()
        .filter_map(|probe| {
            let list = of_probe(run, probe);
            let mut metrics: Vec<&str> = Vec::new();
            for s in &list {
                if !metrics.contains(&s.key.metric.as_str()) {
                    metrics.push(&s.key.metric);
                }
            }
            let worst_of = |m: &str| {
                loads.iter().filter_map(|l| cell(&list, m, l)).map(|c| c.worst_ns.unsigned_abs()).max().unwrap_or(0)
            };
            let metric = metrics
                .iter()
                .copied()
                .find(|m| descriptor::is_release_jitter(probe, m))
                .or_else(|| metrics.iter().copied().max_by_key(|m| worst_of(m)))?;
            let cells: Vec<Option<SummaryCell>> = loads.iter().map(|l| cell(&list, metric, l)).collect();
            cells.iter().any(Option::is_some).then(|| SummaryRow {
                probe: probe.to_string(),
                metric: metric.to_string(),
                metrics: metrics.len(),
                cells,
            })
        })
        .collect()
}

fn machine(run: &Run) -> MachineSummary {
    let inv = &run.inventory;
    let isolation = match (&inv.isolcpus, &inv.nohz_full) {
        (None, None) => "none".to_string(),
        (i, n) => {
            let mut parts = Vec::new();
            if let Some(i) = i {
                parts.push(format!("isolcpus={i}"));
            }
            if let Some(n) = n {
                parts.push(format!("nohz_full={n}"));
            }
            parts.join(" ")
        }
    };
    let mut govs: Vec<String> = inv.governors.iter().filter_map(|g| g.governor.clone()).collect();
    govs.sort();
    govs.dedup();
    MachineSummary {
        preemption: inv.preempt_model.clone(),
        isolation,
        hypervisor: inv.hypervisor.clone(),
        smt_active: inv.smt_active,
        governor: if govs.is_empty() { "no cpufreq".into() } else { govs.join(", ") },
        rt_throttling: match inv.rt_runtime_us {
            Some(-1) => "off".into(),
            Some(r) => format!("{r} us per {} us", inv.rt_period_us.unwrap_or(0)),
            None => "unknown".into(),
        },
        warnings: run.header.warnings.iter().filter(|w| !w.is_informational()).count(),
    }
}

/// The load under which the first row is worst, and why.
fn worst_load(run: &Run, loads: &[Option<String>], rows: &[SummaryRow]) -> Option<WorstLoad> {
    let row = rows.iter().find(|r| descriptor::is_release_jitter(&r.probe, &r.metric)).or(rows.first())?;
    let (i, c) = row
        .cells
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.map(|c| (i, c)))
        .max_by_key(|(_, c)| c.worst_ns.unsigned_abs())?;
    let load = loads[i].clone();
    let idle = loads.iter().position(|l| l.as_deref() == Some(IDLE_LOAD));
    let idle_ns = idle.filter(|&j| j != i).and_then(|j| row.cells[j]).map(|c| c.worst_ns);
    let (why, why_from) = why(run, load.as_deref(), row);
    load.map(|load| WorstLoad {
        load,
        probe: row.probe.clone(),
        metric: row.metric.clone(),
        worst_ns: c.worst_ns,
        idle_ns,
        why,
        why_from,
    })
}

/// Why a load hurts: the top cause of its episodes when traced, else what
/// its counters say.
fn why(run: &Run, load: Option<&str>, row: &SummaryRow) -> (String, &'static str) {
    let episodes: Vec<_> =
        run.episodes.iter().filter(|e| e.load.as_deref() == load && e.probe == row.probe).cloned().collect();
    if let Some(top) = top_causes(&episodes).first() {
        return (
            format!(
                "top cause {} {}: {:.0}% of its {} episodes' latency, at most {} us in one",
                top.kind.as_str(),
                top.name,
                top.share_pct,
                episodes.len(),
                units::us(top.max_ns)
            ),
            "trace",
        );
    }
    let traced = if run.trace.is_some() {
        "traced, no episode above the cause threshold"
    } else {
        "not traced (--trace names the cause)"
    };
    let Some(c) = load.and_then(|l| run.characterisation.iter().find(|c| c.load == l)) else {
        return (traced.to_string(), "none");
    };
    (format!("{}; {traced}", counters(c)), "counters")
}

/// What the kernel's counters say of a load, most telling first.
fn counters(c: &Characterisation) -> String {
    let mut parts = Vec::new();
    if c.load == IDLE_LOAD || c.others_busy_pct >= 10.0 {
        if let Some(p) = c.others.first().filter(|_| c.others_busy_pct >= 10.0) {
            parts.push(format!(
                "other processes kept its CPUs {:.0}% busy (busiest: {} {:.0}%)",
                c.others_busy_pct, p.comm, p.cpu_pct
            ));
        } else if c.load == IDLE_LOAD {
            parts.push(format!("nothing else ran ({:.0}% busy by others)", c.others_busy_pct));
        }
    }
    if c.steal_pct >= 1.0 {
        parts.push(format!("the hypervisor stole {:.1}% of the CPU time", c.steal_pct));
    }
    if c.load != IDLE_LOAD {
        parts.push(format!(
            "CPUs {:.0}% busy ({:.0}% system, {:.0}% irq), {:.0} interrupts/s, {:.0} context switches/s",
            c.cpu_busy_pct,
            c.system_pct,
            c.irq_pct + c.softirq_pct,
            c.interrupts_per_s,
            c.context_switches_per_s
        ));
    }
    if c.verdict() != "ok" && c.verdict() != "-" {
        parts.push(format!("load check: {}", c.verdict()));
    }
    parts.join("; ")
}

/// How long each cell measured (the longest series' time), seconds.
fn observed_s(run: &Run) -> f64 {
    run.series
        .iter()
        .filter(|s| !rtscope_model::irqtime::from_trace(&s.key.metric))
        .map(|s| s.intervals.iter().map(|iv| iv.end_ns.saturating_sub(iv.start_ns)).sum::<u64>() as f64 / 1e9)
        .fold(0.0, f64::max)
}

/// What to do next: measure longer, trace, then the run's own warnings'
/// fixes; at most six.
fn next(run: &Run, s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let obs = observed_s(run);
    let hour_needs = 3600.0 / REFUSED;
    if let Some(v) = s.verdict.as_ref().filter(|v| !v.measure_runs.is_empty()) {
        out.push(format!("measure what the requirements judge and the run lacks: {}", v.measure_runs.join("; ")));
    }
    if let Some(m) = s.verdict.as_ref().and_then(|v| v.measure_for.clone()) {
        out.push(format!("measure longer: at least {m} per cell for the requirements without enough data"));
    } else if obs > 0.0 && obs < hour_needs {
        out.push(format!(
            "measure longer: the expected worst case per hour needs at least {} per cell (this run: {}): \
             `rtscope run --duration {}`",
            units::human((hour_needs * 1e9) as u64),
            units::human((obs * 1e3).round() as u64 * 1_000_000),
            units::human((hour_needs * 1e9) as u64)
        ));
    }
    let traceable =
        s.rows.iter().any(|r| descriptor::find(&r.probe).is_some_and(|d| !matches!(d.trace, descriptor::Trace::No)));
    if run.trace.is_none() && traceable {
        out.push("name the causes of the worst cases: measure again with `--trace`".into());
    }
    // The run's tuning warnings, those that distort the figures first,
    // then the notes on what bounds the latency (kernel, isolation,
    // hypervisor): each with its fix.
    const FIRST: [&str; 4] = ["kernel", "hypervisor", "isolation", "preempt-mode"];
    let mut ws: Vec<_> = run.header.warnings.iter().collect();
    ws.sort_by_key(|w| (w.is_informational(), FIRST.iter().position(|t| *t == w.topic).unwrap_or(FIRST.len())));
    for w in ws {
        out.push(format!("{}: {}", w.message, w.fix));
    }
    out.truncate(6);
    out
}
