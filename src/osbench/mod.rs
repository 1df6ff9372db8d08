//! `osbench`: the cost and wake-up latency of the OS services a real-time
//! program calls at run time, the Linux counterpart of CEBench / OSBench
//! and of the SSC benchmark (the CE 3.0 real-time paper lists CEBench's tests,
//! the CE .NET testing article shows OSBench's output, the Siemens CE 3.0
//! assessment the SSC set), and of lmbench, `perf bench`
//! and rt-tests' ptsematest, pmqtest, svsematest and sigwaittest.
//!
//! Every test says exactly what it times ([`TestDef::def`]). Two-party
//! tests run their parties pinned to one CPU by default, at SCHED_FIFO
//! priorities the test defines (the base priority `-p` is "higher",
//! 5 below "medium", 10 below "lower"); `--cross-cpu` runs them again with
//! the other party on another CPU. Inter-process tests fork a child that
//! dies with rtscope; their shared objects live in anonymous shared
//! memory, POSIX queues are unlinked as soon as they are open and SysV
//! semaphores are removed after the test (by the janitor process should
//! rtscope die first).

mod calls;
mod channel;
pub mod harness;
mod locks;
mod ping;
mod runner;
mod ssc;
mod wakeup;

use crate::recorder::ExceedMode;
use crate::sys::cache::FlushBuffer;
use crate::sys::{clock, cpu, ipc::Janitor, sched::Policy};
use anyhow::{Result, bail};
use harness::{Env, Outcome};
use rtscope_model::descriptor::{OSBENCH, TestGroup};
use rtscope_model::hist::Tally;
use rtscope_model::run::{Exceedance, Interval, SeriesKey};
use rtscope_model::store::Store;
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The groups, in the order they run and print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Locks,
    Wakeup,
    Ping,
    Calls,
    Ssc,
}

impl Group {
    pub const ALL: [Group; 5] = [Group::Locks, Group::Wakeup, Group::Ping, Group::Calls, Group::Ssc];

    /// Its name and title: osbench's row in the descriptor table lists the
    /// groups in this order.
    fn row(self) -> &'static TestGroup {
        &OSBENCH.test_groups()[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.row().name
    }

    pub fn title(self) -> &'static str {
        self.row().title
    }
}

/// The parties' priorities in the tests with an equal-priority variant
/// (the wake-up primitives and the mutex handoff): `--priorities`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Priorities {
    /// As each test defines: the waiter 10 above the signaller, so that it preempts inside the signalling call.
    #[default]
    Test,
    /// Both parties at -p, as rt-tests run them: the woken party runs when the signaller blocks for its reply.
    Equal,
    /// Each such test both ways: a +equal row beside the test's own.
    Both,
}

impl Priorities {
    pub fn name(self) -> &'static str {
        match self {
            Priorities::Test => "test",
            Priorities::Equal => "equal",
            Priorities::Both => "both",
        }
    }
}

/// Iterations per sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ips {
    /// One operation per sample, always.
    One,
    /// A loop of this many by default; `--ips` sets another.
    Loop(u32),
    /// A fixed number the test defines (e.g. a queue's capacity).
    Fixed(u32),
}

/// One test: a row of [`TESTS`], given by its family's file.
#[derive(Clone, Copy)]
pub struct TestDef {
    pub id: &'static str,
    pub name: &'static str,
    pub group: Group,
    /// Exactly what is timed: from which event to which event.
    pub def: &'static str,
    /// Whether the other party is another process.
    pub inter: bool,
    /// The parties and their priorities.
    pub parties: &'static str,
    pub ips: Ips,
    /// Whether a --cross-cpu variant means something.
    pub cross: bool,
    /// Whether it has an equal-priority variant (`--priorities equal`):
    /// then the call in which the signalling party blocks for the woken
    /// party's reply right after its signal.
    pub equal: Option<&'static str>,
    /// Samples when -n is not given (default 10000).
    pub n: u64,
    pub run: fn(&Env) -> Result<Outcome>,
}

/// Samples when -n is not given.
const N: u64 = 10_000;
/// The parties of a single-party test.
const ONE: &str = "one thread";

pub use locks::INVERSION_NS;
pub use runner::{Bench, CELL_MAX_SAMPLES, CELL_TESTS, Cell, Measured, Plan, Settings, other_than};

/// Every test, in the order they run: each family's rows, from its own
/// file, in the order of [`Group::ALL`]. `-t` takes an id, a number (the
/// position here, from 1) or a group name.
pub static TESTS: &[TestDef] = &ALL;

static ALL: [TestDef; COUNT] = concat([locks::TESTS, wakeup::TESTS, ping::TESTS, calls::TESTS, ssc::TESTS]);

const COUNT: usize =
    locks::TESTS.len() + wakeup::TESTS.len() + ping::TESTS.len() + calls::TESTS.len() + ssc::TESTS.len();

/// The families' rows, one family after the other.
const fn concat(families: [&[TestDef]; Group::ALL.len()]) -> [TestDef; COUNT] {
    let mut all = [families[0][0]; COUNT];
    let (mut k, mut f) = (0, 0);
    while f < families.len() {
        let mut i = 0;
        while i < families[f].len() {
            all[k] = families[f][i];
            k += 1;
            i += 1;
        }
        f += 1;
    }
    assert!(k == COUNT, "COUNT is the families' rows");
    all
}

impl std::fmt::Debug for TestDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TestDef({})", self.id)
    }
}

impl TestDef {
    /// The test's 1-based number in [`TESTS`] (0 for a copy of a row).
    pub fn num(&self) -> usize {
        TESTS.iter().position(|t| std::ptr::eq(t, self)).map_or(0, |p| p + 1)
    }

    /// What is timed with `--priorities equal`, when it has that variant.
    pub fn equal_def(&self) -> Option<String> {
        self.equal.map(|w| {
            format!(
                "the same span with both parties at -p: the woken party does not preempt the signaller and runs only when the signaller, right after its call, blocks in {w} until the woken party has taken its sample and answers (as rt-tests' senders do), so the span adds the return from the signalling call and the entry into that wait up to the switch"
            )
        })
    }

    /// Its IPS under `--ips`.
    pub fn effective_ips(&self, ips: Option<u32>) -> u32 {
        match self.ips {
            Ips::One => 1,
            Ips::Loop(d) => ips.unwrap_or(d),
            Ips::Fixed(n) => n,
        }
    }
}

/// The tests `-t` selects (all when none), in table order, or an error
/// naming the unknown one.
pub fn select(wanted: &[String]) -> Result<Vec<&'static TestDef>> {
    if wanted.is_empty() {
        return Ok(TESTS.iter().collect());
    }
    let mut picked = vec![false; TESTS.len()];
    for w in wanted {
        let w = w.trim();
        let hits: Vec<usize> = match w.parse::<usize>() {
            Ok(n) if (1..=TESTS.len()).contains(&n) => vec![n - 1],
            Ok(n) => bail!("-t {n}: there are tests 1 to {} (rtscope osbench --list)", TESTS.len()),
            Err(_) => {
                let exact: Vec<usize> = (0..TESTS.len()).filter(|&i| TESTS[i].id == w).collect();
                if exact.is_empty() {
                    (0..TESTS.len())
                        .filter(|&i| TESTS[i].group.name() == w || TESTS[i].id.split('.').next() == Some(w))
                        .collect()
                } else {
                    exact
                }
            }
        };
        if hits.is_empty() {
            bail!(
                "-t {w}: no such test; give an id (e.g. -t wake.futex-intra), a number or a group ({}); see rtscope osbench --list",
                Group::ALL.map(Group::name).join(", ")
            );
        }
        for h in hits {
            picked[h] = true;
        }
    }
    Ok(TESTS.iter().zip(picked).filter(|(_, p)| *p).map(|(t, _)| t).collect())
}

/// `rtscope osbench --list`.
pub fn list(out: &mut dyn Write) -> Result<()> {
    writeln!(out, "rtscope osbench tests: id, name, inter-process, IPS default, parties; what exactly is timed")?;
    writeln!(
        out,
        "(times are CLOCK_MONOTONIC reads through the vDSO; the timing overhead, measured first, is subtracted;\n two-party tests: both parties on one CPU unless --cross-cpu; priorities: higher = -p, medium = -p - 5, lower = -p - 10;\n tests marked --priorities equal also run with both parties at -p, as rt-tests do: a +equal row)"
    )?;
    for g in Group::ALL {
        writeln!(out, "\n{}", g.title())?;
        for t in TESTS.iter().filter(|t| t.group == g) {
            let ips = match t.ips {
                Ips::One => "1".to_string(),
                Ips::Loop(n) => format!("{n} (--ips)"),
                Ips::Fixed(n) => format!("{n} (fixed)"),
            };
            writeln!(
                out,
                "{:>3}  {:<22} {}  [{}; IPS {ips}; {}{}{}{}]",
                t.num(),
                t.id,
                t.name,
                if t.inter { "inter-process" } else { "intra-process" },
                t.parties,
                if t.cross { "; --cross-cpu" } else { "" },
                if t.equal.is_some() { "; --priorities equal" } else { "" },
                if t.n != N { format!("; -n default {}", t.n) } else { String::new() },
            )?;
            writeln!(out, "     timed: {}", t.def)?;
            if let Some(e) = t.equal_def() {
                writeln!(out, "     timed, --priorities equal: {e}")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_has_its_row_in_the_descriptor_table_in_order() {
        assert_eq!(OSBENCH.test_groups().len(), Group::ALL.len());
        for (i, g) in Group::ALL.into_iter().enumerate() {
            assert_eq!(g as usize, i);
            assert!(!g.name().is_empty() && g.title().starts_with(|c: char| c.is_lowercase()), "{g:?}");
        }
        assert_eq!(Group::Ssc.name(), "ssc");
    }

    #[test]
    fn ids_are_unique_and_defined() {
        let mut ids: Vec<&str> = TESTS.iter().map(|t| t.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), TESTS.len());
        for t in TESTS {
            assert!(t.def.len() > 20 && t.def.starts_with(|c: char| c.is_lowercase()), "{}", t.id);
            assert!(t.id.contains('.') && !t.id.contains(' '), "{}", t.id);
        }
        // Every wake-up primitive and ping-pong comes intra and inter.
        for g in [Group::Wakeup, Group::Ping] {
            let of: Vec<&TestDef> = TESTS.iter().filter(|t| t.group == g).collect();
            assert_eq!(of.iter().filter(|t| t.inter).count() * 2, of.len());
        }
        // Every wake-up test and the handoff have an equal-priority variant
        // (the tests rt-tests' peers time), and nothing else has.
        for t in TESTS {
            let want = t.group == Group::Wakeup || t.id.starts_with("mutex.handoff");
            assert_eq!(t.equal.is_some(), want, "{}", t.id);
            if let Some(e) = t.equal {
                assert!(e.len() > 10 && !e.starts_with("the same"), "{}: {e}", t.id);
                assert!(t.equal_def().unwrap().contains(e));
            }
        }
    }

    #[test]
    fn each_family_gives_its_group_in_order() {
        let families = [
            (locks::TESTS, Group::Locks),
            (wakeup::TESTS, Group::Wakeup),
            (ping::TESTS, Group::Ping),
            (calls::TESTS, Group::Calls),
            (ssc::TESTS, Group::Ssc),
        ];
        assert_eq!(families.map(|f| f.1), Group::ALL);
        for (rows, g) in families {
            assert!(!rows.is_empty(), "{g:?}");
            for t in rows {
                assert_eq!(t.group, g, "{}", t.id);
            }
        }
        let mut groups: Vec<Group> = TESTS.iter().map(|t| t.group).collect();
        groups.dedup();
        assert_eq!(groups, Group::ALL);
        assert_eq!(TESTS.len(), families.iter().map(|f| f.0.len()).sum::<usize>());
        assert_eq!(TESTS[5].num(), 6);
    }

    #[test]
    fn selection_by_id_number_and_group() {
        assert_eq!(select(&[]).unwrap().len(), TESTS.len());
        assert_eq!(select(&["wake.futex-intra".into()]).unwrap()[0].id, "wake.futex-intra");
        assert_eq!(select(&["1".into()]).unwrap()[0].id, TESTS[0].id);
        let calls = select(&["atomic".into()]).unwrap();
        assert_eq!(calls.len(), 4);
        assert_eq!(select(&["ssc".into(), "ssc.fork".into()]).unwrap().len(), 15);
        let e = select(&["nope".into()]).unwrap_err().to_string();
        assert!(e.contains("-t nope") && e.contains("--list"), "{e}");
        assert!(select(&["999".into()]).is_err());
    }

    #[test]
    fn the_list_names_every_test() {
        let mut out = Vec::new();
        list(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for t in TESTS {
            assert!(text.contains(t.id) && text.contains(t.def), "{}", t.id);
            if let Some(e) = t.equal_def() {
                assert!(text.contains(&format!("timed, --priorities equal: {e}")), "{}", t.id);
            }
        }
    }
}
