//! What users of cyclictest and rtla type out of habit: cyclictest's flags
//! on `rtscope wakeup` (taken with their cyclictest meaning where rtscope
//! has the concept, else refused with rtscope's way to say it), the units
//! of cyclictest's bare numbers, and the command line rewritten before
//! clap sees it: `-h N` (cyclictest's histogram; `-h` alone stays the
//! help) and `--db PATH` before the subcommand.

use super::*;
use rtscope_model::settings::CpuList;
use std::ffi::OsString;

/// cyclictest's flags on `rtscope wakeup`.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "cyclictest's flags")]
pub struct Cyclictest {
    /// cyclictest -a: the CPUs to measure, as --cpus; alone, the default (every online CPU the cgroup's cpuset allows).
    #[arg(short = 'a', long, value_name = "LIST", num_args = 0..=1, default_missing_value = "",
          conflicts_with = "cpus")]
    pub affinity: Option<String>,
    /// cyclictest -t: rtscope runs one thread per measured CPU: -t alone is the default (every CPU it may measure);
    /// -t N with -a/--cpus must name as many CPUs; -t N without them measures the first N CPUs it may measure.
    #[arg(short = 't', long, value_name = "N", num_args = 0..=1, default_missing_value = "")]
    pub threads: Option<String>,
    /// cyclictest -m: memory is always locked (mlockall); accepted.
    #[arg(short = 'm', long)]
    pub mlockall: bool,
    /// cyclictest -S: one thread per CPU, pinned, clock_nanosleep: the default; accepted.
    #[arg(short = 'S', long)]
    pub smp: bool,
    /// cyclictest -n: clock_nanosleep is what wakeup sleeps with; accepted.
    #[arg(short = 'n', long)]
    pub nanosleep: bool,
    /// cyclictest -h N: at the end, print cyclictest's histogram of the latency instead of the summary, one line per
    /// microsecond 0..N-1 and one column per CPU, then its `# Total:`, `# Min Latencies:`, `# Avg Latencies:`, `#
    /// Max Latencies:` and `# Histogram Overflows:` lines (-h N works too; -h alone is this help).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub histogram: Option<u32>,
    /// cyclictest -H N: --histogram with a last column of every CPU together.
    #[arg(short = 'H', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000),
          conflicts_with = "histogram")]
    pub histofall: Option<u32>,
    /// cyclictest --histfile: write the histogram to FILE instead of stdout (the summary is printed as usual).
    #[arg(long, value_name = "FILE")]
    pub histfile: Option<PathBuf>,
    /// cyclictest --mainaffinity: rtscope keeps its own threads off the measured CPUs by itself.
    #[arg(long, value_name = "LIST")]
    pub mainaffinity: Option<String>,
}

/// What `--histogram` / `--histofall` ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistogramOpts {
    /// Buckets of 1 us: 0..buckets_us-1; above is an overflow.
    pub buckets_us: u32,
    /// A last column of every CPU together (-H).
    pub all_column: bool,
    /// Where to write it: stdout when None.
    pub file: Option<PathBuf>,
}

impl Cyclictest {
    /// The common arguments with `-a` taken as `--cpus`, after refusing
    /// the flags that rtscope says otherwise.
    pub fn apply(&self, common: &CommonArgs) -> Result<CommonArgs> {
        if let Some(list) = &self.mainaffinity {
            bail!(
                "--mainaffinity {list}: rtscope keeps its own threads (the writer, the trace reader) off the measured \
                 CPUs and their SMT siblings by itself: leave --mainaffinity out (the plan of each run stores them as \
                 housekeeping_cpus)"
            );
        }
        if self.histfile.is_some() && self.histogram.is_none() && self.histofall.is_none() {
            bail!("--histfile needs --histogram N (or -h N): the number of 1 us buckets");
        }
        if self.histfile.is_some() {
            check_outputs(
                &[("--histfile", self.histfile.as_deref()), ("--json", common.out.json.as_deref())],
                &common.store.db,
            )?;
        }
        let mut common = common.clone();
        match self.affinity.as_deref() {
            Some("") => common.measure.cpus = None,
            Some(list) => {
                let list = rtscope_model::settings::CpuList::parse(list).map_err(|e| anyhow::anyhow!("-a: {e}"))?;
                common.measure.cpus = Some(list);
            }
            None => {}
        }
        if let Some(text) = self.threads.as_deref().filter(|n| !n.is_empty()) {
            common.measure.cpus = Some(threads(text, common.measure.cpus.as_ref(), &cpu::measurable())?);
        }
        Ok(common)
    }

    pub fn histogram(&self) -> Option<HistogramOpts> {
        let (buckets_us, all_column) = match (self.histogram, self.histofall) {
            (Some(n), _) => (n, false),
            (None, Some(n)) => (n, true),
            (None, None) => return None,
        };
        let file = self.histfile.clone().filter(|p| *p != std::path::Path::new("-"));
        Some(HistogramOpts { buckets_us, all_column, file })
    }
}

/// cyclictest's `-t N` as rtscope's CPUs: one thread per measured CPU, so
/// the CPUs given (`-a`, `--cpus`) must be N, or, none given, the first N
/// of those it may measure (`measurable`).
fn threads(text: &str, given: Option<&CpuList>, measurable: &[usize]) -> Result<CpuList> {
    let n = match text.trim().parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => bail!(
            "-t {text}: give a number of threads above 0 (e.g. -t 2), or -t alone for every CPU rtscope may measure"
        ),
    };
    let list = |c: &[usize]| rtscope_model::inventory::format_cpu_list(c);
    match given {
        Some(cpus) if cpus.cpus().len() == n => Ok(cpus.clone()),
        Some(cpus) => bail!(
            "-t {n} with {} CPUs ({}): rtscope runs one thread per measured CPU; give -t {}, or leave -t out",
            cpus.cpus().len(),
            list(cpus.cpus()),
            cpus.cpus().len()
        ),
        None if n <= measurable.len() => {
            CpuList::of(measurable[..n].to_vec()).ok_or_else(|| anyhow::anyhow!("-t {n}: no CPU to measure"))
        }
        None => bail!(
            "-t {n}: rtscope runs one thread per measured CPU, and may measure {} here ({}): give -t {} or less",
            measurable.len(),
            list(measurable),
            measurable.len()
        ),
    }
}

/// A duration whose bare number is in microseconds (cyclictest's -i, -d, -b).
pub fn dur_us(s: &str) -> Result<u64, String> {
    bare(s, 1_000).unwrap_or_else(|| dur(s))
}

/// [`dur_us`] above 0 (a period, a threshold).
pub fn dur_us_above_0(s: &str) -> Result<u64, String> {
    match dur_us(s)? {
        0 => Err(format!("'{s}' must be above 0 (e.g. 1ms)")),
        d => Ok(d),
    }
}

/// `s` as a whole number of `unit_ns`, when it is a bare number.
fn bare(s: &str, unit_ns: u64) -> Option<Result<u64, String>> {
    let t = s.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(
        t.parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit_ns))
            .filter(|&ns| ns <= u64::MAX / 2)
            .ok_or_else(|| format!("'{s}' is too long")),
    )
}

/// The subcommands whose `-h N` is cyclictest's histogram.
const HISTOGRAM_COMMANDS: &[&str] = &["wakeup"];

/// The command line as clap should see it: `--db PATH` given before the
/// subcommand goes after it (every command that has a store takes it), and
/// `wakeup`'s `-h N` / `-hN` becomes `--histogram N`.
pub fn rewrite(args: Vec<OsString>) -> Vec<OsString> {
    let mut args = args;
    // Options before the subcommand: --db moves right after it.
    let mut early_db = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        if a == "--db" && i + 1 < args.len() {
            early_db.extend(args.drain(i..i + 2));
        } else if a.starts_with("--db=") {
            early_db.push(args.remove(i));
        } else if a.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    if i >= args.len() {
        args.extend(early_db);
        return args;
    }
    let sub = i;
    args.splice(sub + 1..sub + 1, early_db);
    if !HISTOGRAM_COMMANDS.contains(&args[sub].to_string_lossy().as_ref()) {
        return args;
    }
    let number = |a: &OsString| {
        let a = a.to_string_lossy();
        !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit())
    };
    for k in sub + 1..args.len() {
        if args[k] == "-h" && args.get(k + 1).is_some_and(number) {
            args[k] = "--histogram".into();
        } else if let Some(n) = args[k].to_str().and_then(|a| a.strip_prefix("-h")).map(OsString::from)
            && number(&n)
        {
            let mut joined = OsString::from("--histogram=");
            joined.push(n);
            args[k] = joined;
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(args: &[&str]) -> Vec<String> {
        let v = std::iter::once("rtscope").chain(args.iter().copied()).map(OsString::from).collect();
        rewrite(v).into_iter().skip(1).map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn the_command_line_takes_cyclictest_and_db_habits() {
        assert_eq!(rw(&["wakeup", "-h", "400", "-q"]), ["wakeup", "--histogram", "400", "-q"]);
        assert_eq!(rw(&["wakeup", "-h400"]), ["wakeup", "--histogram=400"]);
        assert_eq!(rw(&["wakeup", "-h"]), ["wakeup", "-h"]);
        assert_eq!(rw(&["wakeup", "-h", "-q"]), ["wakeup", "-h", "-q"]);
        assert_eq!(rw(&["noise", "-h", "400"]), ["noise", "-h", "400"]);
        assert_eq!(rw(&["--db", "x.db", "runs"]), ["runs", "--db", "x.db"]);
        assert_eq!(rw(&["--db=x.db", "show", "last"]), ["show", "--db=x.db", "last"]);
        assert_eq!(rw(&["runs", "--db", "x.db"]), ["runs", "--db", "x.db"]);
        assert_eq!(rw(&["--db", "x.db"]), ["--db", "x.db"]);
        assert_eq!(rw(&["--version"]), ["--version"]);
    }

    /// -t N is N measured CPUs: those given, when as many, else the first
    /// N that may be measured.
    #[test]
    fn threads_are_cpus() {
        let given = CpuList::parse("0-1").unwrap();
        assert_eq!(threads("2", Some(&given), &[0, 1]).unwrap().cpus(), &[0, 1]);
        assert_eq!(threads("1", None, &[2, 3]).unwrap().cpus(), &[2]);
        let e = threads("2", Some(&CpuList::parse("1").unwrap()), &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("-t 2 with 1 CPUs (1)") && e.contains("give -t 1"), "{e}");
        assert!(threads("3", None, &[0, 1]).unwrap_err().to_string().contains("give -t 2 or less"));
        assert!(threads("0", None, &[0, 1]).is_err() && threads("x", None, &[0]).is_err());
    }

    #[test]
    fn bare_numbers_take_cyclictest_units() {
        assert_eq!(dur_us("100"), Ok(100_000));
        assert_eq!(dur_us("100ms"), Ok(100_000_000));
        assert!(dur_us_above_0("0").unwrap_err().contains("must be above 0"));
        assert_eq!(dur_us_above_0("2"), Ok(2_000));
        assert!(dur_us("99999999999999999999").is_err());
        assert!(dur_us("1.5").unwrap_err().contains("unit"));
    }
}
