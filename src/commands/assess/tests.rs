use super::plan::{produces, shuffled};
use super::*;
use crate::cli::registry::Built;
use crate::report::Input;
use crate::session::CellOutcome;
use crate::sys::sched::Policy;
use rtscope_model::analysis::rta;
use rtscope_model::descriptor;
use rtscope_model::run::RunStatus;
use rtscope_model::store::Store;
use std::path::Path;
use std::time::Duration;

#[test]
fn embedded_plans_resolve_and_fit_their_time() {
    let db = Path::new("/tmp/never-created.db");
    let default = Plan::resolve(&PlanFile::parse(DEFAULT_PLAN, "default").unwrap(), "default", db).unwrap();
    assert_eq!(default.probes.len(), descriptor::PROBES.iter().filter(|d| d.default).count());
    let s = default.length_ns() / 1_000_000_000;
    assert!((240..=330).contains(&s), "default plan: {s} s");
    let quick = Plan::resolve(&PlanFile::parse(QUICK_PLAN, "quick").unwrap(), "quick", db).unwrap();
    assert!(quick.length_ns() < 55_000_000_000, "quick plan: {} s", quick.length_ns() / 1_000_000_000);
    assert_eq!(quick.cells.len(), quick.probes.len() * quick.loads.len());
    // Load by load unless shuffled.
    assert_eq!(quick.cells[0], (0, 0));
    assert_eq!(quick.cells[1], (0, 1));
}

#[test]
fn the_campaign_example_parses() {
    let f = PlanFile::parse(include_str!("../../../plans/campaign-12h.toml"), "campaign-12h.toml").unwrap();
    assert_eq!(f.duration.map(|d| d.ns()), Some(12 * 3_600_000_000_000));
    assert_eq!(f.loads.as_ref().unwrap().len(), 8);
    assert_eq!(f.args["wakeup"], vec!["--interval", "500us", "--priority", "98"]);
}

/// `wakeup@95`, `wakeup@80`: two cells of wakeup, each at its priority
/// under its own name, each with its own [args], else wakeup's.
#[test]
fn instances_of_a_probe_take_their_priority_and_their_args() {
    let db = Path::new("/tmp/never-created.db");
    let text = "probes = [\"wakeup@95\", \"wakeup@80\"]\ncpus = \"0\"\n[args]\n\
                wakeup = [\"--interval\", \"500us\"]\n\"wakeup@80\" = [\"--interval\", \"2ms\"]\n";
    let plan = Plan::resolve(&PlanFile::parse(text, "p.toml").unwrap(), "p.toml", db).unwrap();
    let got: Vec<(String, u8, u64)> = plan
        .probes
        .iter()
        .map(|b| match b {
            Built::PerCpu(c, p) => (b.series_name().to_string(), c.priority, p.plan()["interval_ns"].as_u64().unwrap()),
            Built::Own(_) => unreachable!(),
        })
        .collect();
    assert_eq!(got, vec![("wakeup@95".into(), 95, 500_000), ("wakeup@80".into(), 80, 2_000_000)]);
    assert_eq!(produces(&plan.probes)[1], ("wakeup@80".to_string(), vec!["latency".to_string()]));
}

/// Instances of one probe are one cell (per load), measured together;
/// equal priorities are named apart (`wakeup@80#2`), `:rr` is SCHED_RR;
/// `instances = "in-turn"` makes each its own cell again.
#[test]
fn instances_of_a_probe_are_one_cell_unless_in_turn() {
    let db = Path::new("/tmp/never-created.db");
    let text = "probes = [\"wakeup@80:rr\", \"noise\", \"wakeup@80:rr\", \"wakeup@95\"]\ncpus = \"0\"\n\
                loads = [\"idle\", \"cpu\"]\n";
    let plan = Plan::resolve(&PlanFile::parse(text, "p.toml").unwrap(), "p.toml", db).unwrap();
    let got: Vec<(String, Policy, u8)> = plan
        .probes
        .iter()
        .map(|b| match b {
            Built::PerCpu(c, _) => (b.series_name().to_string(), c.policy, c.priority),
            Built::Own(_) => unreachable!(),
        })
        .collect();
    let want = [("wakeup@80", Policy::Rr, 80), ("noise", Policy::Fifo, 95), ("wakeup@80#2", Policy::Rr, 80)];
    for (g, w) in got.iter().zip(want) {
        assert_eq!((g.0.as_str(), g.1, g.2), w);
    }
    assert_eq!(got[3], ("wakeup@95".to_string(), Policy::Fifo, 95));
    assert_eq!(plan.together, vec![vec![0, 2, 3], vec![1], vec![], vec![]]);
    assert_eq!(plan.cells, vec![(0, 0), (0, 1), (1, 0), (1, 1)]);
    assert_eq!(plan.cell_name(0), "wakeup@80 + wakeup@80#2 + wakeup@95");
    let json = plan.json(&[], "");
    assert_eq!(json["instances"], "together");
    assert!(json["describe"].as_str().unwrap().ends_with("; instances measured together"), "{json}");
    let text = format!("{text}instances = \"in-turn\"\n");
    let plan = Plan::resolve(&PlanFile::parse(&text, "p.toml").unwrap(), "p.toml", db).unwrap();
    assert_eq!(plan.cells.len(), 8);
    assert_eq!(plan.json(&[], "")["instances"], "in-turn");
}

#[test]
fn requirements_are_stored_with_the_plan_and_flags_replace_the_files() {
    let db = Path::new("/tmp/never-created.db");
    let text = "probes = [\"wakeup\"]\nprofiles = [\"omac\"]\nrequire = [\"wakeup.latency.p99 < 50us\"]";
    let file = PlanFile::parse(text, "plan.toml").unwrap();
    let plan = Plan::resolve(&file, "plan.toml", db).unwrap();
    let json = plan.json(&[], "");
    assert_eq!(json["requirements"]["profiles"], serde_json::json!(["omac"]));
    assert_eq!(json["requirements"]["require"], serde_json::json!(["wakeup.latency.p99 < 50us"]));
    let flags = PlanFile { profiles: Some(vec!["audio".into()]), ..Default::default() };
    let both = file.overlay(flags);
    assert_eq!(both.profiles, Some(vec!["audio".to_string()]), "--profile replaces the file's profiles");
    assert_eq!(both.require.unwrap().len(), 1, "the file's require stays");
    let none = Plan::resolve(&PlanFile::parse(QUICK_PLAN, "quick").unwrap(), "quick", db).unwrap();
    assert_eq!(none.json(&[], "")["requirements"]["profiles"], serde_json::json!([]));
}

#[test]
fn a_task_set_comes_with_the_plan_from_a_file_or_inline_and_is_stored() {
    let db = Path::new("/tmp/never-created.db");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sets")).unwrap();
    std::fs::write(
        dir.path().join("sets/ctl.toml"),
        "[[task]]\nname = \"io\"\nwcet = \"200us\"\nperiod = \"1ms\"\n\
         [[task]]\nname = \"ctl\"\nwcet = \"1ms\"\nperiod = \"5ms\"\ndeadline = \"4ms\"\n",
    )
    .unwrap();
    // A task file relative to the plan file, at the plan's error rate.
    let plan_path = dir.path().join("plan.toml");
    std::fs::write(&plan_path, "probes = [\"wakeup\"]\ntasks = \"sets/ctl.toml\"\nerror_rate = 1e-4\n").unwrap();
    let file = PlanFile::read(&plan_path).unwrap();
    let plan = Plan::resolve(&file, "plan.toml", db).unwrap();
    let set = plan.tasks.as_ref().unwrap();
    assert_eq!((set.tasks.len(), set.tasks[1].deadline_ns, set.error_rate), (2, 4_000_000, 1e-4));
    assert!(set.source.ends_with("sets/ctl.toml"), "{}", set.source);
    // Stored with the run, as the model reads it back.
    let stored = &plan.json(&[], "")["schedulability"];
    let back: rta::TaskSet = serde_json::from_value(stored.clone()).unwrap();
    assert_eq!(&back, set);
    assert_eq!(stored["tasks"][0]["wcet_ns"], 200_000);
    // Inline [[task]] tables (after [args]: still top-level tables), at the default error rate.
    let inline = "probes = [\"wakeup\", \"noise\"]\n[args]\nwakeup = [\"--interval\", \"1ms\"]\n\
                  [[task]]\nname = \"a\"\nwcet = \"1ms\"\nperiod = \"10ms\"\npriority = 5\n\
                  [[task]]\nname = \"b\"\nwcet = \"1ms\"\nperiod = \"2ms\"\npriority = 9\n";
    let file = PlanFile::parse(inline, "p.toml").unwrap();
    let plan = Plan::resolve(&file, "p.toml", db).unwrap();
    let set = plan.tasks.unwrap();
    assert_eq!((set.source.as_str(), set.tasks[0].name.as_str()), ("p.toml [[task]]", "b"));
    assert_eq!(set.error_rate, rta::DEFAULT_ERROR_RATE);
    // --tasks replaces the inline tables; --error-rate the rate.
    let flags = PlanFile {
        tasks: Some(dir.path().join("sets/ctl.toml").display().to_string()),
        error_rate: Some(1e-3),
        ..Default::default()
    };
    let both = file.clone().overlay(flags);
    assert!(both.task.is_none() && both.tasks.is_some() && both.error_rate == Some(1e-3));
    let plan = Plan::resolve(&both, "p.toml with flags", db).unwrap();
    assert_eq!(plan.tasks.unwrap().tasks[0].name, "io");
    // Without a task set: none stored.
    let none = Plan::resolve(&PlanFile::parse(QUICK_PLAN, "quick").unwrap(), "quick", db).unwrap();
    assert!(none.json(&[], "")["schedulability"].is_null());
}

#[test]
fn bad_plans_name_the_key() {
    let db = Path::new("/tmp/never-created.db");
    for (text, words) in [
        ("probes = [\"wakeup\"]\nduration = \"10parsecs\"", &["plan.toml", "duration"][..]),
        ("probes = [\"nope\"]", &["plan.toml", "nope", "known"][..]),
        ("probes = [\"wakeup@100\"]", &["plan.toml", "wakeup@100", "1..99"][..]),
        ("probes = [\"osbench@5\"]", &["plan.toml", "osbench@5", "per-CPU"][..]),
        ("probes = [\"wakeup\", \"wakeup\"]", &["plan.toml", "wakeup is listed twice"][..]),
        ("probes = [\"wakeup@90:other\"]", &["plan.toml", "wakeup@90:other", "fifo", "rr"][..]),
        ("probes = [\"wakeup@90\"]\ninstances = \"apart\"", &["plan.toml", "in-turn"][..]),
        ("probes = [\"wakeup@95\", \"wakeup@80\"]\ntrace = true", &["plan.toml", "--trace", "in-turn"][..]),
        ("probes = [\"wakeup\"]\nloads = [\"spin\"]", &["plan.toml", "loads", "spin"][..]),
        ("probes = [\"wakeup\"]\n[args]\nwakeup = [\"--interval\", \"1\"]", &["plan.toml", "wakeup", "--interval"][..]),
        ("probes = [\"wakeup\"]\n[args]\nnoyse = []", &["plan.toml", "noyse"][..]),
        ("probes = [\"wakeup\"]\nduration = \"100ms\"", &["plan.toml", "1s"][..]),
        ("probes = []", &["plan.toml", "empty"][..]),
        ("probes = [\"wakeup\"]\nprofiles = [\"dvd\"]", &["plan.toml: profiles = dvd", "omac"][..]),
        (
            "probes = [\"wakeup\"]\nrequire = [\"wakeup.latency < 50us\"]",
            &["plan.toml: require = 'wakeup.latency < 50us'", "statistic"][..],
        ),
        (
            "probes = [\"wakeup\"]\ntasks = \"/nonexistent/set.toml\"",
            &["plan.toml: tasks = /nonexistent/set.toml", "cannot read"][..],
        ),
        (
            "probes = [\"wakeup\"]\n[[task]]\nname = \"a\"\nwcet = \"1\"\nperiod = \"1ms\"",
            &["plan.toml: [[task]]", "task 'a'", "wcet"][..],
        ),
        (
            "probes = [\"wakeup\"]\n[[task]]\nname = \"a\"\nwcet = \"1ms\"\nperiod = \"1ms\"\nwcett = 1",
            &["plan.toml", "wcett"][..],
        ),
        (
            "probes = [\"wakeup\"]\ntasks = \"x.toml\"\n[[task]]\nname = \"a\"\nwcet = \"1ms\"\nperiod = \"2ms\"",
            &["plan.toml", "not both"][..],
        ),
        ("probes = [\"wakeup\"]\nerror_rate = 1e-3", &["plan.toml: error_rate needs a task set", "[[task]]"][..]),
        (
            "probes = [\"wakeup\"]\nerror_rate = 2.0\n[[task]]\nname = \"a\"\nwcet = \"1ms\"\nperiod = \"2ms\"",
            &["plan.toml: error_rate = 2", "between 0 and 1"][..],
        ),
        (
            "probes = [\"noise\"]\n[[task]]\nname = \"a\"\nwcet = \"1ms\"\nperiod = \"2ms\"",
            &["plan.toml", "wake-up latency", "add it", "--probes wakeup,noise"][..],
        ),
    ] {
        let e = PlanFile::parse(text, "plan.toml")
            .and_then(|f| Plan::resolve(&f, "plan.toml", db))
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        for w in words {
            assert!(e.contains(w), "{text}: {e}");
        }
    }
    let e = PlanFile::parse("probe = [\"wakeup\"]", "plan.toml").unwrap_err().to_string();
    assert!(e.contains("plan.toml") && e.contains("probe"), "{e}");
}

/// A measurement with its own runner: one series per cell, one sample
/// per millisecond of the cell.
struct Counter;

impl crate::session::OwnCell for Counter {
    fn name(&self) -> &'static str {
        "counter"
    }
    fn plan(&self) -> serde_json::Value {
        serde_json::json!({"what": "test"})
    }
    fn metrics(&self) -> Vec<String> {
        vec!["n".into()]
    }
    fn measure(
        &self,
        run: &mut crate::session::OpenRun,
        load: &str,
        duration_ns: u64,
        _: (crate::sys::sched::Policy, u8),
        _: &Arc<AtomicBool>,
    ) -> Result<CellOutcome> {
        std::thread::sleep(Duration::from_nanos(duration_ns));
        let id = run.run_id;
        let store = run.store()?;
        let key = rtscope_model::run::SeriesKey {
            load: Some(load.into()),
            ..rtscope_model::run::SeriesKey::new("counter", "n", -1)
        };
        let sid = store.add_series(id, &key, "ns", "none")?;
        let mut t = rtscope_model::hist::Tally::new();
        t.record(duration_ns / 1_000_000);
        let iv = rtscope_model::run::Interval::new(0, 0, duration_ns, &t, 0, 0);
        store.commit_checkpoint(&[(sid, &iv)], &[])?;
        Ok(CellOutcome::default())
    }
}

#[test]
fn a_measurement_with_its_own_runner_joins_the_matrix() {
    // It runs a real `cpu` load on CPU 0 for a second.
    let _machine = crate::machine_lock();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let file = PlanFile {
        probes: Some(vec!["wakeup".into()]),
        loads: Some(vec!["idle".into(), "cpu@0".into()]),
        duration: Some(rtscope_model::settings::CellDuration::parse("1s").unwrap()),
        warmup: Some(rtscope_model::settings::Warmup::new(0).unwrap()),
        ramp_up: Some(rtscope_model::settings::Warmup::new(0).unwrap()),
        score: Some(rtscope_model::settings::ScoreTime::new(100_000_000).unwrap()),
        ..Default::default()
    };
    let mut plan = Plan::resolve(&file, "test", &db).unwrap();
    plan.probes = vec![Built::Own(Box::new(Counter))];
    let opts = Options { db: db.clone(), json: None, quiet: true, dma_latency: None };
    let code = run(plan, &opts, &Arc::new(AtomicBool::new(false))).unwrap();
    assert_eq!(code, 0);
    let run = Store::open(&db).unwrap().load_run(1).unwrap();
    assert_eq!(run.header.status, RunStatus::Complete, "{:?}", run.header.notes);
    let loads: Vec<_> = run.series.iter().map(|s| (s.key.probe.as_str(), s.key.load.as_deref())).collect();
    assert_eq!(loads, [("counter", Some("cpu@0")), ("counter", Some("idle"))]);
    assert_eq!(run.characterisation.len(), 2);
    assert!(run.characterisation[1].cpu_busy_pct >= 50.0, "{:?}", run.characterisation[1]);
    assert!(run.cpu_score.is_some());
    let mut text = Vec::new();
    crate::report::TEXT.write(&Input::one(&run), &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("counter n") && text.contains("characterisation"), "{text}");
}

#[test]
fn the_plan_counts_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let one = PlanFile { probes: Some(vec!["wakeup".into()]), loads: Some(vec!["idle".into()]), ..Default::default() };
    let text = Plan::resolve(&one, "test", &db).unwrap().describe();
    assert!(text.starts_with("1 probe x 1 load: 1 cell of 10s"), "{text}");
    let two = PlanFile { probes: Some(vec!["wakeup".into(), "noise".into()]), ..one };
    let text = Plan::resolve(&two, "test", &db).unwrap().describe();
    assert!(text.starts_with("2 probes x 1 load: 2 cells of"), "{text}");
}

#[test]
fn shuffling_keeps_every_cell() {
    let v: Vec<u32> = (0..24).collect();
    let mut s = shuffled(v.clone(), 7);
    assert_ne!(s, v);
    s.sort_unstable();
    assert_eq!(s, v);
    let a = PlanFile { shuffle: Some(true), seed: Some(3), ..Default::default() };
    let b = PlanFile::parse(QUICK_PLAN, "q").unwrap().overlay(a);
    assert_eq!((b.shuffle, b.seed, b.loads.unwrap().len()), (Some(true), Some(3), 3));
}
