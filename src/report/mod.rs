//! Output formats: one file each, behind one trait, [`Format`], in one
//! table, [`FORMATS`]. `export --format`, `report --format` / `-o FILE.EXT`
//! and `show` choose from the table, and their `--help` lists come from it;
//! the measuring commands write their summary and `--json` through it.
//! Beside the formats: the document that HTML and Markdown render
//! (`run_doc`, `doc.rs`, `sections.rs`), its plots and tables, and the
//! machine's rows that every format with a machine header shows
//! (`machine.rs`).

pub mod analyze;
mod code;
pub mod comparison;
mod csv;
mod cyclictest;
mod doc;
mod flame;
pub mod fleet;
mod hdr;
pub mod html;
mod irqtime;
mod json;
mod judged;
mod machine;
mod markdown;
mod matrix;
mod osbench_csv;
mod perfetto;
mod platform;
pub mod quiet;
mod schedule;
mod sections;
mod summary;
mod svg;
pub mod tailplot;
mod text;
mod wrap;

pub use comparison::Comparison;
pub use cyclictest::CyclictestHist;
pub use summary::{Summary, short_count, short_us};
pub use text::write_episodes;
pub use wrap::fit;
pub use wrap::{WIDTH, wrap as wrap_text};

use crate::judge::{Judged, RequireSpec, TasksSpec};
use anyhow::{Context, Result, bail};
use rtscope_model::run::Run;
use std::io::Write;
use std::path::Path;

/// An output format of runs.
pub trait Format: Sync {
    /// Its name: the value of `--format`.
    fn name(&self) -> &'static str;
    /// The extension of its files, without the dot: `report -o FILE.EXT` picks the format by it.
    fn extension(&self) -> &'static str;
    /// One line for `--help`.
    fn description(&self) -> &'static str;
    /// The commands that offer it.
    fn uses(&self) -> &'static [Use];
    /// Writes `input` to `out`. Only the formats that take several runs
    /// (see [`Use::Report`]) write more than [`Input::run`].
    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<Written>;
    /// Whether it writes the run's timeline of its traced window
    /// ([`Input::timeline`]), which the command then reads from the store.
    fn reads_timeline(&self) -> bool {
        false
    }
    /// Whether it writes every interval's histogram from
    /// [`Input::intervals`] (in time order) or [`Input::rows`] (a series
    /// at a time) when given, so that the command need not read the run
    /// whole: it streams them from the store instead.
    fn streams_intervals(&self) -> bool {
        false
    }
    /// Whether it writes only what a run read summed holds (its header,
    /// each series' totals, its episodes and trace; not the intervals'
    /// histograms nor every exceedance), so that the command reads the
    /// run so ([`rtscope_model::store::Store::load_run_summed`]): its
    /// memory then follows the run's series, not its length.
    fn reads_summed(&self) -> bool {
        self.streams_intervals()
    }
}

/// A run's intervals with their histograms, in the order of their start
/// times, each with the index of its series in the run
/// ([`rtscope_model::store::Store::for_each_interval_in_time`]).
pub type Intervals<'a> = dyn Fn(&mut dyn FnMut(usize, rtscope_model::run::Interval) -> Result<()>) -> Result<()> + 'a;

impl std::fmt::Debug for dyn Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a format is offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// What a measuring command prints and writes to `--json`, and what
    /// `rtscope show` prints (text, or `--json`).
    Summary,
    /// `rtscope export --format`: one run, for other tools.
    Export,
    /// `rtscope report --format` / `-o FILE.EXT`: a document of one or more
    /// runs, judged against requirements.
    Report,
    /// `rtscope osbench -o FILE.csv`.
    Osbench,
}

/// The text summary: a table and a histogram per probe (an assessment: its matrix), then warnings and notes.
pub const TEXT: &dyn Format = &text::Text;
/// The common JSON shape (`--json`, `show --json`); lossless with [`Input::full`] (`export`).
pub const JSON: &dyn Format = &json::Json;
/// One row per histogram bucket.
pub const CSV: &dyn Format = &csv::Csv;
/// The HdrHistogram interval log.
pub const HDR: &dyn Format = &hdr::Hdr;
/// The cause episodes as a Chrome JSON trace.
pub const PERFETTO: &dyn Format = &perfetto::Perfetto;
/// The report as one self-contained HTML file.
pub const HTML: &dyn Format = &html::Html;
/// The report as Markdown, without the plots.
pub const MARKDOWN: &dyn Format = &markdown::Markdown;
/// osbench's tests, a row each.
pub const OSBENCH_CSV: &dyn Format = &osbench_csv::OsbenchCsv;

/// Every output format of runs.
pub static FORMATS: [&dyn Format; 8] = [TEXT, JSON, CSV, HDR, PERFETTO, HTML, MARKDOWN, OSBENCH_CSV];

/// The formats `u` offers, in the table's order.
pub fn offered(u: Use) -> impl Iterator<Item = &'static dyn Format> {
    FORMATS.iter().copied().filter(move |f| f.uses().contains(&u))
}

/// The format named `name`.
pub fn named(name: &str) -> Option<&'static dyn Format> {
    FORMATS.iter().copied().find(|f| f.name() == name)
}

/// The format of `u` whose extension `path` has.
pub fn by_extension(u: Use, path: &Path) -> Option<&'static dyn Format> {
    let ext = path.extension()?;
    offered(u).find(|f| ext == f.extension())
}

/// What a format writes: the runs, and the choices some formats take.
#[derive(Clone, Copy)]
pub struct Input<'a> {
    /// One run, or for the formats of [`Use::Report`] several (a chapter each).
    pub runs: &'a [Run],
    /// JSON: every interval's histogram and exceedance too (lossless, what
    /// `rtscope import` reads), not only the summary.
    pub full: bool,
    /// Text: the machine and the run's setup first (`rtscope show`).
    pub machine: bool,
    /// JSON: the run's verdicts and schedulability after its document (`rtscope run --json`).
    pub judged: Option<&'a Judged<'a>>,
    /// HTML, Markdown: the requirements to judge against (else those stored with each run, else the yardstick).
    pub req: Option<&'a RequireSpec>,
    /// HTML, Markdown: the task set (else the one stored with each run).
    pub tasks: Option<&'a TasksSpec>,
    /// HTML, Markdown: the MTTF plots' x-axis.
    pub mttf_axis: tailplot::MttfAxis,
    /// HTML, Markdown: what a day and a week of the levels are (else the
    /// usage stored with each run).
    pub usage: Option<rtscope_model::analysis::usage::Usage>,
    /// Text: colour (a terminal, and NO_COLOR unset).
    pub colour: bool,
    /// Text: what a probe's tables show their times in (`--ns`).
    pub unit: rtscope_model::units::ShownIn,
    /// Text: an assessment's answer left out, for the caller to print
    /// last, after the details ([`write_answer`]: `rtscope run`).
    pub answer_last: bool,
    /// Perfetto: the run's timeline of its whole traced window, where the
    /// format [reads it](Format::reads_timeline) and the run has one.
    pub timeline: Option<&'a rtscope_model::episode::timeline::Timeline>,
    /// Formats that [stream intervals](Format::streams_intervals): the
    /// run's intervals with their histograms, read from the store as they
    /// are written (the run in `runs` then holds its intervals without).
    pub intervals: Option<&'a Intervals<'a>>,
    /// The same, a series at a time: each series' intervals with their
    /// histograms, then its exceedances, read from the store as they are
    /// written (the run in `runs` then holds neither whole).
    pub rows: Option<&'a dyn rtscope_model::export::SeriesRows>,
}

impl<'a> Input<'a> {
    /// `runs`, and no choice taken.
    pub fn new(runs: &'a [Run]) -> Input<'a> {
        Input {
            runs,
            full: false,
            machine: false,
            judged: None,
            req: None,
            tasks: None,
            mttf_axis: Default::default(),
            usage: None,
            colour: false,
            unit: Default::default(),
            answer_last: false,
            timeline: None,
            intervals: None,
            rows: None,
        }
    }

    /// One run, and no choice taken.
    pub fn one(run: &'a Run) -> Input<'a> {
        Input::new(std::slice::from_ref(run))
    }

    /// The run of a format that writes one.
    pub fn run(&self) -> Result<&'a Run> {
        match self.runs {
            [one] => Ok(one),
            runs => bail!("this format writes one run, not {}", runs.len()),
        }
    }
}

/// What writing found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// A requirement asked for (given or stored, not the default yardstick)
    /// failed, or a task set missed a deadline: the formats that judge the
    /// runs (HTML, Markdown) say so, and the command exits with code 2.
    pub failed: bool,
}

/// Writes `input` in `format` to `path` (`-` for stdout), naming `flag`
/// and the file when it cannot be written.
pub fn write(flag: &str, path: &Path, format: &dyn Format, input: &Input) -> Result<Written> {
    write_to(flag, path, |out| format.write(input, out))
}

/// Runs `write` on stdout through a buffer, flushed at the end: Rust's
/// stdout writes each line at once, which made a large document (the
/// 355 000 lines of a `--quick` run's `analyze --json`) as many system
/// calls, a quarter of the command's time. For whole documents, not for lines
/// that must show as they come.
pub fn to_stdout<R>(write: impl FnOnce(&mut dyn Write) -> Result<R>) -> Result<R> {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    let done = write(&mut out)?;
    out.flush()?;
    Ok(done)
}

/// Runs `write` on `path` (`-` for stdout), naming `flag` and the file when
/// it cannot be written. The file is created at the first byte written: a
/// writer that fails before (a run without episodes for Perfetto, a task
/// set that cannot be read) leaves none behind.
pub fn write_to<R>(flag: &str, path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<R>) -> Result<R> {
    if path == Path::new("-") {
        return to_stdout(write);
    }
    let cannot = || format!("{flag} {}: cannot write it", path.display());
    let mut file = LazyFile { path, file: None, error: None };
    let done = write(&mut file);
    if let Some(e) = file.error.take() {
        return Err(anyhow::Error::new(e).context(cannot()));
    }
    let done = done?;
    file.open().with_context(cannot)?;
    if file.flush().is_err() {
        let e = file.error.take().unwrap_or_else(|| std::io::Error::other("flush failed"));
        return Err(anyhow::Error::new(e).context(cannot()));
    }
    Ok(done)
}

/// A file created at its first write.
struct LazyFile<'a> {
    path: &'a Path,
    file: Option<std::io::BufWriter<std::fs::File>>,
    /// Why it could not be created.
    error: Option<std::io::Error>,
}

impl LazyFile<'_> {
    fn open(&mut self) -> std::io::Result<&mut std::io::BufWriter<std::fs::File>> {
        if self.file.is_none() {
            match std::fs::File::create(self.path) {
                Ok(f) => self.file = Some(std::io::BufWriter::new(f)),
                Err(e) => {
                    let kind = e.kind();
                    self.error = Some(e);
                    return Err(kind.into());
                }
            }
        }
        Ok(self.file.as_mut().expect("created above"))
    }
}

impl LazyFile<'_> {
    /// `r`, its error kept to be named with the file (`/dev/full`: "No
    /// space left on device" alone did not say where).
    fn kept<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        r.map_err(|e| {
            let kind = e.kind();
            self.error.get_or_insert(e);
            kind.into()
        })
    }
}

impl Write for LazyFile<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.open()?.write(buf);
        self.kept(r)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = match &mut self.file {
            Some(f) => f.flush(),
            None => Ok(()),
        };
        self.kept(r)
    }
}

/// The report of `runs` as a document: a chapter per run, each judged
/// against the requirements of `req` (else those stored with it, else the
/// default yardstick) and the task set of `tasks` (else the one stored with
/// it). Also returns whether a requirement asked for (given or stored, not
/// the yardstick) failed, or the task set missed a deadline.
fn run_doc(
    runs: &[Run],
    req: &RequireSpec,
    tasks: &TasksSpec,
    mttf_axis: tailplot::MttfAxis,
    usage: Option<rtscope_model::analysis::usage::Usage>,
) -> Result<(doc::Doc, bool)> {
    let ids: Vec<String> = runs.iter().map(|r| r.header.id.to_string()).collect();
    let title = match runs {
        [one] => format!("rtscope report: run {} ({}, {})", one.header.id, one.header.kind, one.header.hostname),
        _ => format!("rtscope report: runs {}", ids.join(", ")),
    };
    let mut chapters = Vec::new();
    let mut failed = false;
    for (i, r) in runs.iter().enumerate() {
        let set = crate::judge::asked_set(r, tasks)?;
        let mut a = judged::Analysed::new(r, crate::judge::asked(r, req, true)?, set, usage);
        a.mttf_axis = mttf_axis;
        failed |= a.failed();
        chapters.push(sections::chapter(&a, &format!("r{}", i + 1)));
    }
    Ok((doc::Doc { title, chapters }, failed))
}

/// The document of `input`'s runs, judged against its requirements and task
/// set (else each run's own), rendered by `render` (HTML or Markdown).
fn write_judged_doc(
    input: &Input,
    out: &mut dyn Write,
    render: fn(&doc::Doc, &mut dyn Write) -> Result<()>,
) -> Result<Written> {
    if input.runs.is_empty() {
        bail!("no run to write");
    }
    let req = input.req.cloned().unwrap_or_default();
    let tasks = input.tasks.cloned().unwrap_or_default();
    let (doc, failed) = run_doc(input.runs, &req, &tasks, input.mttf_axis, input.usage)?;
    render(&doc, out)?;
    Ok(Written { failed })
}

/// Whether text on stdout may be in colour: stdout is a terminal and
/// NO_COLOR (https://no-color.org) is unset or empty.
pub fn colour_on_stdout() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The summary of `input`'s run (decided in `judge::answer`): with the
/// verdicts it was judged with (`rtscope run`), else judged here against
/// the requirements stored with it, else the yardstick.
fn run_summary(input: &Input) -> Result<summary::Summary> {
    let run = input.run()?;
    if let Some(j) = input.judged {
        let from = j.requirements_from.unwrap_or(crate::judge::ReqSource::Default);
        let judgement = summary::Judgement { from, against: j.against.clone(), verdicts: j.verdicts };
        return Ok(summary::Summary::new(run, Some(judgement)));
    }
    Summary::as_stored(run)
}

/// The line after a stored run: where it is and what to run next on it
/// (`--db` named unless it is the default store).
/// Wrapped at [`wrap::WIDTH`] columns.
pub fn stored_line(run_id: i64, db: &Path) -> String {
    let at = if db == Path::new("rtscope.db") { String::new() } else { format!(" --db {}", db.display()) };
    let line = format!(
        "run {run_id} stored in {}: rtscope report {run_id}{at} -o run{run_id}.html (plots, verdicts), \
         rtscope analyze {run_id}{at} (worst case per hour/day/week), rtscope show {run_id}{at}",
        db.display()
    );
    wrap::wrap("", &line, 2).trim_start().to_string()
}

/// An assessment's answer, after its details (`rtscope run`, whose
/// [`Input::answer_last`] left it out of the text): a rule, then the
/// summary with the verdict last. Nothing for a run without one.
pub fn write_answer(input: &Input, out: &mut dyn Write) -> Result<()> {
    if !input.run()?.is_matrix() {
        return Ok(());
    }
    let s = run_summary(input)?;
    if s.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n-- answer {}", "-".repeat(wrap::WIDTH - 10))?;
    summary::write_text(&s, out, input.colour, summary::Place::Last)
}

/// The fixed run of tests/data, and variants of it, for tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use rtscope_model::episode::{
        Cause, CauseKind, CodeStack, Episode, Folded, Frame, OverRow, ProfileSummary, Remainder, SampleRow,
        StacksSummary, Stages, WindowSamples, verdict,
    };
    use rtscope_model::hist::Tally;
    use rtscope_model::run::{Interval, Run, Series, SeriesKey};

    /// The fixed run: wakeup, traced, on two CPUs.
    pub(crate) fn fixture() -> Run {
        rtscope_model::export::read_json(include_str!("../../tests/data/report-run.json"), "fixture")
            .expect("the fixture reads")
    }

    /// The fixture with a signed series first: two intervals of 1000
    /// samples each, 500 of them negative.
    pub(crate) fn signed_run() -> Run {
        let mut run = fixture();
        let intervals = (0..2u32)
            .map(|seq| {
                let mut t = Tally::new_signed();
                for v in -500..500i64 {
                    t.record_signed(v * 11 + i64::from(seq));
                }
                Interval::new(seq, u64::from(seq) * 100, u64::from(seq + 1) * 100, &t, 0, 0)
            })
            .collect();
        let key = SeriesKey::new("sleep", "nanosleep@5ms", 1);
        run.series.insert(0, Series::new(key, "ns".into(), "adaptive".into(), intervals, vec![]).unwrap());
        run
    }

    /// The fixture as an assessment: its series under the loads
    /// `cmd:'a, b'` and `idle`.
    pub(crate) fn matrix_run() -> Run {
        let mut run = fixture();
        run.header.kind = "run".into();
        let mut series = Vec::new();
        for load in ["cmd:'a, b'", "idle"] {
            for s in &run.series {
                let mut s = s.clone();
                s.key.load = Some(load.into());
                series.push(s);
            }
        }
        run.series = series;
        run
    }

    fn frame(function: &str, offset: u64, module: &str) -> Frame {
        let addr = if module == "kernel" { 0xffff_ffff_8120_0000 } else { 0x7f9a_5380_0000 } + offset;
        Frame {
            addr,
            function: Some(function.into()),
            offset: Some(offset),
            module: Some(module.into()),
            ..Default::default()
        }
    }

    /// An episode with all its code (docs/trace.md's example): a SCHED_OTHER
    /// `forker` in `fork()`'s `dup_mmap` holds the probe off 942.1 us, 120 us of
    /// it with interrupts off; the stacks at the wake-up (the timer interrupt
    /// on top of dup_mmap), the blocker's profiler sample, 10 samples in the
    /// window (10 kHz, NMI), the remainder named.
    pub(crate) fn code_episode() -> Episode {
        let cause = |kind, name: &str, ns| Cause {
            kind,
            name: name.into(),
            pid: Some(20092),
            irq: None,
            sched: None,
            stage: None,
            host: None,
            kernel_ns: None,
            ns,
        };
        let causes = vec![
            Cause {
                sched: Some("SCHED_OTHER".into()),
                stage: Some("thread".into()),
                ..cause(CauseKind::Thread, "forker", 740_000)
            },
            Cause { stage: Some("irq".into()), ..cause(CauseKind::Unaccounted, "forker", 120_000) },
            Cause { pid: None, ..cause(CauseKind::Irq, "local_timer", 62_600) },
            Cause { pid: None, ..cause(CauseKind::Timer, "timer", 17_000) },
            Cause { pid: None, ..cause(CauseKind::User, "return to user", 2_500) },
        ];
        let stages = Stages { irq_ns: 120_000, handler_ns: 1_400, wake_ns: 900, thread_ns: 817_300, user_ns: 2_500 };
        let p = 5_000_000_000;
        let fork =
            ["copy_process", "kernel_clone", "__do_sys_clone", "do_syscall_64", "entry_SYSCALL_64_after_hwframe"];
        let below = |f: &mut Vec<Frame>| f.extend(fork.iter().map(|n| frame(n, 0x65, "kernel")));
        let user = vec![
            frame("__libc_fork", 0x53, "libc.so.6"),
            Frame { file: Some("forker.c".into()), line: Some(31), ..frame("main", 0x2c, "forker") },
        ];
        let irq = ["try_to_wake_up", "hrtimer_wakeup", "__hrtimer_run_queues", "hrtimer_interrupt"];
        let mut kernel: Vec<Frame> = irq.iter().map(|n| frame(n, 0x1e, "kernel")).collect();
        kernel.push(frame("asm_sysvec_apic_timer_interrupt", 0x1a, "kernel"));
        kernel.push(frame("security_vm_enough_memory_mm", 0x36, "kernel"));
        kernel.push(frame("dup_mmap", 0x255, "kernel"));
        below(&mut kernel);
        let stack = CodeStack {
            taken: "wake-up".into(),
            t_ns: p + 7_700,
            pid: 20092,
            comm: "forker".into(),
            kernel,
            user: user.clone(),
            notes: vec!["libc.so.6 has no debug symbols: no file and line".into()],
            unwind_ns: Some(6_100),
            unwinder: Some("fp".into()),
        };
        let mut kernel =
            vec![frame("anon_vma_interval_tree_insert", 0x1c, "kernel"), frame("dup_mmap", 0x1e0, "kernel")];
        below(&mut kernel);
        let blocker = CodeStack {
            taken: "profiler sample".into(),
            t_ns: p + 400_000,
            pid: 20092,
            comm: "forker".into(),
            kernel,
            user,
            notes: vec![],
            unwind_ns: None,
            unwinder: Some("dwarf".into()),
        };
        let chain = "main;__libc_fork;entry_SYSCALL_64_after_hwframe [k];do_syscall_64 [k];__do_sys_clone [k];\
                     kernel_clone [k];copy_process [k];dup_mmap [k]";
        let row = |function: &str, module: &str, samples| SampleRow {
            function: function.into(),
            module: module.into(),
            samples,
        };
        let folded = |stack: String, samples| Folded { stack, samples };
        let samples = WindowSamples {
            samples: 10,
            expected: 9.4,
            irqs_off: Some(2),
            rows: vec![
                row("anon_vma_interval_tree_insert", "kernel", 4),
                row("dup_mmap", "kernel", 3),
                row("copy_page_range", "kernel", 2),
                row("main", "forker", 1),
            ],
            folded: vec![
                folded(format!("{chain};anon_vma_interval_tree_insert [k]"), 4),
                folded(chain.to_string(), 3),
                folded(format!("{chain};copy_page_range [k]"), 2),
                folded("main".into(), 1),
            ],
            unwinders: [("dwarf".to_string(), 9), ("dwarf+fp".to_string(), 1)].into(),
        };
        let why = "2 of 2 NMI samples in the stretch had interrupts off; interrupts came back in dup_mmap (forker)";
        Episode {
            probe: "wakeup".into(),
            load: None,
            metric: "latency".into(),
            cpu: 1,
            sample: 892,
            programmed_ns: p,
            woke_ns: p + stages.total(),
            latency_ns: stages.total(),
            verdict: verdict(1, 892, "latency", stages.total(), Some(&stages), &causes),
            stages: Some(stages),
            causes,
            slices: vec![],
            stack: Some(stack),
            blocker: Some(blocker),
            samples: Some(samples),
            remainder: Some(Remainder { ns: 120_000, verdict: "interrupts off".into(), why: why.into() }),
        }
    }

    /// The fixture with [`code_episode`] as its worst episode, and its
    /// stacks and profiler summed up.
    pub(crate) fn code_run() -> Run {
        let mut run = fixture();
        run.episodes.insert(0, code_episode());
        let t = run.trace.as_mut().expect("the fixture is traced");
        t.stacks = Some(StacksSummary {
            taken: 4001,
            episodes: 1,
            cost_p50_ns: 2_900,
            cost_max_ns: 10_400,
            lost: 0,
            notes: vec!["the user frames of 3 processes were not named: they had exited".into()],
        });
        t.profile = Some(ProfileSummary {
            event: "cycles (hardware, NMI)".into(),
            hz: 10_000,
            blind_spot: "time the hypervisor takes".into(),
            samples: 60_000,
            in_episodes: 10,
            lost: 0,
            over: vec![OverRow {
                function: "anon_vma_interval_tree_insert".into(),
                module: "kernel".into(),
                inside: 4,
                outside: 40,
                ratio: 599.9,
            }],
            notes: vec![
                "cycles (hardware, NMI) at 10000 Hz per CPU: it cannot see time the hypervisor takes".into(),
                "forker was built without frame pointers: its user stacks end at the first frame".into(),
            ],
            over_of: 0,
        });
        run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_each_format_once_and_offers_it_somewhere() {
        for (i, f) in FORMATS.iter().enumerate() {
            assert!(FORMATS[..i].iter().all(|g| g.name() != f.name()), "{} twice", f.name());
            assert!(!f.uses().is_empty() && !f.description().is_empty() && !f.extension().is_empty(), "{f:?}");
            assert_eq!(named(f.name()).map(|g| g.name()), Some(f.name()));
        }
        let names = |u| offered(u).map(|f| f.name()).collect::<Vec<_>>();
        assert_eq!(names(Use::Export), ["json", "csv", "hdr", "perfetto"]);
        assert_eq!(names(Use::Report), ["html", "md"]);
        assert_eq!(names(Use::Summary), ["text", "json"]);
        assert_eq!(names(Use::Osbench), ["osbench-csv"]);
        // `report -o FILE.EXT` tells its formats apart by the extension.
        assert_eq!(by_extension(Use::Report, Path::new("a/r.md")).map(|f| f.name()), Some("md"));
        assert_eq!(by_extension(Use::Report, Path::new("r.html")).map(|f| f.name()), Some("html"));
        assert!(by_extension(Use::Report, Path::new("r.json")).is_none());
        assert!(by_extension(Use::Report, Path::new("-")).is_none());
    }

    #[test]
    fn a_format_that_fails_leaves_no_file_and_an_unwritable_one_names_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let run = fixtures::fixture();
        let mut no_episodes = run.clone();
        no_episodes.episodes.clear();
        let path = dir.path().join("ep.json");
        let e = write("--output", &path, PERFETTO, &Input::one(&no_episodes)).unwrap_err();
        assert!(e.to_string().contains("no timeline, cause episodes or markers"), "{e:#}");
        assert!(!path.exists(), "nothing written, no file");
        write("--output", &path, PERFETTO, &Input::one(&run)).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("traceEvents"));
        let bad = dir.path().join("missing").join("r.csv");
        let e = format!("{:#}", write("--json", &bad, CSV, &Input::one(&run)).unwrap_err());
        assert!(e.starts_with(&format!("--json {}: cannot write it", bad.display())), "{e}");
        // An empty output still makes its file.
        let empty = dir.path().join("empty");
        write_to("--output", &empty, |_| Ok(())).unwrap();
        assert_eq!(std::fs::read(&empty).unwrap(), b"");
    }

    #[test]
    fn one_run_formats_refuse_several() {
        let run = fixtures::fixture();
        let two = [run.clone(), run];
        let e = TEXT.write(&Input::new(&two), &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("one run"), "{e}");
        let mut md = Vec::new();
        MARKDOWN.write(&Input::new(&two), &mut md).unwrap();
        assert!(String::from_utf8(md).unwrap().starts_with("# rtscope report: runs 1, 1"));
    }
}
