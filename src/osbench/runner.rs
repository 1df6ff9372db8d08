//! Running the selected tests: the run in the store, its series, the CSV.

use super::*;

/// One measurement to make: a test and its variant.
struct Job {
    test: &'static TestDef,
    cross: bool,
    flush: bool,
}

impl Job {
    fn metric(&self) -> String {
        let mut m = self.test.id.to_string();
        if self.cross {
            m.push_str("+cross");
        }
        if self.flush {
            m.push_str("+flush");
        }
        m
    }
}

/// Settings of an osbench run, validated.
pub struct Plan {
    pub tests: Vec<&'static TestDef>,
    pub n: Option<u64>,
    pub ips: Option<u32>,
    pub cache_flush: bool,
    pub cross_cpu: bool,
    pub cpu: usize,
    pub other_cpu: Option<usize>,
    pub policy: Policy,
    pub priority: u8,
    pub csv: Option<std::path::PathBuf>,
    pub json: Option<std::path::PathBuf>,
    pub db: std::path::PathBuf,
    pub quiet: bool,
    pub dma_latency: bool,
}

impl Plan {
    pub fn from_args(a: &OsbenchArgs) -> Result<Plan> {
        let tests = select(&a.test)?;
        let online = cpu::online();
        let cpu_ = match a.cpu {
            Some(c) => cpu::parse_selection("--cpu", &c.to_string())?[0],
            None => *cpu::allowed().iter().rfind(|c| online.contains(c)).unwrap_or(&0),
        };
        let other_cpu = if a.cross_cpu {
            let o = match a.other_cpu {
                Some(o) => cpu::parse_selection("--other-cpu", &o.to_string())?[0],
                None => *cpu::allowed().iter().find(|&&c| c != cpu_ && online.contains(&c)).ok_or_else(|| {
                    anyhow::anyhow!("--cross-cpu needs a second CPU and this process may run on CPU {cpu_} only")
                })?,
            };
            if o == cpu_ {
                bail!("--other-cpu {o} is the measured CPU (--cpu); pick another");
            }
            Some(o)
        } else {
            if a.other_cpu.is_some() {
                bail!("--other-cpu only means something with --cross-cpu");
            }
            None
        };
        if a.policy.is_rt() && !(11..=99).contains(&a.priority) {
            bail!("--priority must be 11..99: the lower party runs 10 below it (e.g. --priority 90)");
        }
        crate::cli::check_writable("--db", &a.store.db)?;
        for (flag, p) in [("--json", &a.json), ("--output", &a.output)] {
            if let Some(p) = p.as_deref().filter(|p| *p != std::path::Path::new("-")) {
                crate::cli::check_writable(flag, p)?;
            }
        }
        Ok(Plan {
            tests,
            n: a.samples,
            ips: a.ips,
            cache_flush: a.cache_flush,
            cross_cpu: a.cross_cpu,
            cpu: cpu_,
            other_cpu,
            policy: a.policy,
            priority: a.priority,
            csv: a.output.clone(),
            json: a.json.clone(),
            db: a.store.db.clone(),
            quiet: a.quiet,
            dma_latency: !a.no_dma_latency,
        })
    }

    fn jobs(&self) -> Vec<Job> {
        let mut jobs = Vec::new();
        for &t in &self.tests {
            let one = t.effective_ips(self.ips) == 1;
            let mut crosses = vec![false];
            if self.cross_cpu && t.cross {
                crosses.push(true);
            }
            for &cross in &crosses {
                jobs.push(Job { test: t, cross, flush: false });
            }
            if self.cache_flush && one {
                for &cross in &crosses {
                    jobs.push(Job { test: t, cross, flush: true });
                }
            }
        }
        jobs
    }
}

/// Runs the plan, stores the run, prints the tables. Returns the exit code.
pub fn run(plan: &Plan, signal: &Arc<AtomicBool>) -> Result<i32> {
    // The janitor first, while rtscope has one thread and no file open
    // that it should not hold.
    let janitor = Janitor::start()?;
    let inv = inventory::collect();
    let measured: Vec<usize> = std::iter::once(plan.cpu).chain(plan.other_cpu).collect();
    let mut warnings = inv.warnings(&measured);
    let mut policy = plan.policy;
    let mut representative = inv.representative();
    if policy.is_rt() && !sched::can_use_rt(plan.priority) {
        warnings.insert(
            0,
            Warning {
                topic: "privileges".into(),
                message: format!(
                    "cannot use SCHED_{} priorities: measuring at SCHED_OTHER, where the higher-priority party does not preempt the lower one; the run is NOT representative",
                    format!("{policy:?}").to_uppercase()
                ),
                fix: "run as root or grant CAP_SYS_NICE (setcap cap_sys_nice,cap_ipc_lock+ep rtscope), or raise RLIMIT_RTPRIO".into(),
            },
        );
        policy = Policy::Other;
        representative = false;
    }
    if let Err(e) = mem::lock_all() {
        warnings.push(Warning {
            topic: "memory".into(),
            message: format!("mlockall failed ({e}): page faults may add latency"),
            fix: "run as root or raise RLIMIT_MEMLOCK (ulimit -l unlimited)".into(),
        });
    }
    let _dma = if plan.dma_latency {
        match DmaLatency::hold(0) {
            Ok(d) => Some(d),
            Err(e) => {
                warnings.push(Warning {
                    topic: "cstates".into(),
                    message: format!("cannot hold /dev/cpu_dma_latency at 0 ({e}): deep C-states may add exit latency"),
                    fix: "run as root, or pass --no-dma-latency to measure with C-states on purpose".into(),
                });
                None
            }
        }
    } else {
        None
    };
    if !plan.quiet {
        for w in warnings.iter().filter(|w| !w.is_informational()) {
            eprintln!("rtscope: warning: {} (fix: {})", w.message, w.fix);
        }
    }
    let housekeeping = cpu::housekeeping(&cpu::online(), &measured, &inv.siblings);
    if !housekeeping.is_empty() {
        let _ = cpu::pin_self(&housekeeping);
    }
    let jobs = plan.jobs();
    let flush = (plan.cache_flush && jobs.iter().any(|j| j.flush)).then(|| FlushBuffer::new(None));
    let describe = describe(plan, policy);
    let plan_doc = json!({
        "probe": "osbench",
        "metrics": jobs.iter().map(Job::metric).collect::<Vec<_>>(),
        "effective_policy": policy,
        "effective_priority": if policy.is_rt() { plan.priority } else { 0 },
        "describe": describe,
        "housekeeping_cpus": rtscope_model::inventory::format_cpu_list(&housekeeping),
        "settings": {
            "tests": plan.tests.iter().map(|t| t.id).collect::<Vec<_>>(),
            "samples": plan.n,
            "ips": plan.ips,
            "cache_flush": plan.cache_flush,
            "flush_bytes": flush.as_ref().map(FlushBuffer::bytes),
            "cross_cpu": plan.cross_cpu,
            "cpu": plan.cpu,
            "other_cpu": plan.other_cpu,
            "priority": plan.priority,
            "policy": plan.policy,
            "clock": "CLOCK_MONOTONIC, clock_gettime through the vDSO",
            "settle_ns": harness::SETTLE_NS,
            "inversion_ns": locks::INVERSION_NS,
        },
    });
    let mut store = Store::open(&plan.db)?;
    let header = crate::probe::new_header("osbench", std::env::args().collect(), representative, warnings);
    let run_id = store.create_run(&header, &inv, &plan_doc)?;
    let progress = !plan.quiet && std::io::stderr().is_terminal();
    let mut notes: Vec<String> = Vec::new();
    let mut failed = 0;
    for (k, job) in jobs.iter().enumerate() {
        if signal.load(Relaxed) {
            break;
        }
        let t = job.test;
        let n = plan.n.unwrap_or(t.n) as usize;
        let ips = t.effective_ips(plan.ips);
        let env = Env {
            cpu: plan.cpu,
            other: if job.cross { plan.other_cpu.unwrap_or(plan.cpu) } else { plan.cpu },
            cross: job.cross,
            policy,
            prio: plan.priority,
            ips,
            n,
            warmup: (n / 10).clamp(5, 1000),
            flush: if job.flush { flush.as_ref() } else { None },
            stop: signal,
            janitor: &janitor,
            seq: k as u32,
        };
        if progress {
            eprint!("\r\x1b[K[{}/{}] {}", k + 1, jobs.len(), job.metric());
        }
        match (t.run)(&env) {
            Ok(out) if out.raw.is_empty() => {
                if !signal.load(Relaxed) {
                    notes.push(format!("{}: no sample", job.metric()));
                }
            }
            Ok(out) => store_outcome(&mut store, run_id, job, &env, &out)?,
            Err(e) => {
                failed += 1;
                let msg = format!("{}: not measured: {e:#}", job.metric());
                if !plan.quiet {
                    if progress {
                        eprintln!();
                    }
                    eprintln!("rtscope: warning: {msg}");
                }
                notes.push(msg);
            }
        }
    }
    if progress {
        eprint!("\r\x1b[K");
    }
    let interrupted = signal.load(Relaxed);
    if interrupted {
        notes.push("stopped by a signal (SIGINT/SIGTERM) before its planned end; the tests done are stored".into());
    }
    let status = if interrupted { RunStatus::Interrupted } else { RunStatus::Complete };
    store.finish_run(run_id, status, Some(0), clock::now_unix(), &notes, mem::peak_rss_kb())?;
    drop(janitor);
    mem::unlock_all();
    let run = store.load_run(run_id)?;
    if let Some(path) = &plan.json {
        report::write_file(path, &report::Json, &run)?;
    }
    if let Some(path) = &plan.csv {
        report::write_file(path, &Csv, &run)?;
    }
    let to_stdout = |p: &Option<std::path::PathBuf>| p.as_deref() == Some(std::path::Path::new("-"));
    if !plan.quiet && !to_stdout(&plan.json) && !to_stdout(&plan.csv) {
        let mut out = std::io::stdout().lock();
        report::Text { describe }.write(&run, &mut out)?;
        println!(
            "run {run_id} stored in {} (rtscope show {run_id}, rtscope export {run_id} --format json)",
            plan.db.display()
        );
    }
    if failed > 0 && failed == jobs.len() {
        bail!("no test could be measured (see the warnings above)");
    }
    Ok(0)
}

fn describe(plan: &Plan, policy: Policy) -> String {
    let mut s = format!("CPU {}", plan.cpu);
    if let Some(o) = plan.other_cpu {
        s += &format!(" (+cross-CPU: other party on CPU {o})");
    }
    if policy.is_rt() {
        s += &format!(", priorities {}/{}/{}", plan.priority, plan.priority - 5, plan.priority - 10);
    }
    if let Some(n) = plan.n {
        s += &format!(", {n} samples per test");
    }
    if let Some(i) = plan.ips {
        s += &format!(", IPS {i}");
    }
    if plan.cache_flush {
        s += ", cache flush";
    }
    s
}

/// Stores one test as a series: its histogram, its samples at or above
/// its p99.9, and its own figures.
fn store_outcome(store: &mut Store, run_id: i64, job: &Job, env: &Env, out: &Outcome) -> Result<()> {
    let t = job.test;
    let (values, below) = out.values();
    let mut tally = Tally::new();
    for &(_, v) in &values {
        tally.record(v);
    }
    let first = out.raw.first().map_or(0, |&(t1, raw)| t1.saturating_sub(raw));
    let last = values.last().map_or((0, 0), |&p| p);
    let iv = Interval::new(0, first, last.0.max(first), &tally, 0, 0);
    let threshold = tally.quantile(0.999).max(0) as u64;
    let exc: Vec<Exceedance> = values
        .iter()
        .filter(|&&(_, v)| v >= threshold)
        .map(|&(t_ns, value_ns)| Exceedance { t_ns, value_ns })
        .collect();
    let key = SeriesKey::new("osbench", &job.metric(), env.cpu as i64);
    let sid = store.add_series(run_id, &key, "ns", &ExceedMode::Adaptive.describe())?;
    store.commit_checkpoint(&[(sid, &iv)], &[(sid, &exc)])?;
    let mut extra = serde_json::Map::new();
    extra.insert("test".into(), json!(t.id));
    extra.insert("num".into(), json!(t.num()));
    extra.insert("name".into(), json!(t.name));
    extra.insert("group".into(), json!(t.group.name()));
    extra.insert("ips".into(), json!(out.ips));
    extra.insert("inter_process".into(), json!(t.inter));
    extra.insert("cache_flush".into(), json!(job.flush));
    extra.insert("cross_cpu".into(), json!(job.cross));
    extra.insert("other_cpu".into(), if t.parties == ONE { Value::Null } else { json!(env.other) });
    extra.insert("base_ns".into(), json!(out.base_ns));
    extra.insert("last_ns".into(), json!(last.1));
    extra.insert("below_base".into(), json!(below));
    if let Some(n) = &out.note {
        extra.insert("note".into(), json!(n));
    }
    store.set_series_extra(sid, &extra)?;
    Ok(())
}

/// `-o FILE.csv`: one row per test, times in microseconds.
pub struct Csv;

impl Report for Csv {
    fn write(&self, run: &Run, out: &mut dyn Write) -> Result<()> {
        writeln!(
            out,
            "run_id,group,num,id,metric,name,ips,inter_process,cache_flush,cross_cpu,cpu,other_cpu,samples,last_us,min_us,mean_us,p50_us,p99_us,max_us,base_ns"
        )?;
        for s in run.series.iter().filter(|s| s.key.probe == "osbench") {
            let m = s.total().summary();
            let x =
                |k: &str| s.extra.get(k).map_or(String::new(), |v| v.as_str().map_or(v.to_string(), str::to_string));
            let last = s.extra.get("last_ns").and_then(Value::as_u64).unwrap_or(0);
            let name = x("name").replace('"', "'");
            writeln!(
                out,
                "{},{},{},{},{},\"{name}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                run.header.id,
                x("group"),
                x("num"),
                x("test"),
                s.key.metric,
                x("ips"),
                x("inter_process"),
                x("cache_flush"),
                x("cross_cpu"),
                s.key.cpu,
                x("other_cpu").replace("null", ""),
                m.count,
                units::us(last),
                units::us_i(m.min_ns),
                units::us_f(m.mean_ns),
                units::us_i(m.p50_ns),
                units::us_i(m.p99_ns),
                units::us_i(m.max_ns),
                x("base_ns"),
            )?;
        }
        Ok(())
    }
}
