//! The Perfetto export read back by another parser than rtscope's writer
//! (tests/data/perfetto/tef.py: Python's JSON module, with the Trace Event
//! Format's fields checked), and the application's markers judged against
//! its own log of them (tests/data/markers/marks.c).

use super::*;

/// One event of the export, times in ns.
#[derive(Debug, Clone)]
pub struct Event {
    pub ph: String,
    pub cat: String,
    pub pid: u64,
    pub tid: u64,
    pub ts_ns: u64,
    pub dur_ns: u64,
    pub name: String,
    pub args: serde_json::Value,
}

/// The export as Python read it.
#[derive(Debug, Default)]
pub struct Tef {
    pub events: Vec<Event>,
    /// (process_name or thread_name, pid, tid, name).
    pub names: Vec<(String, u64, u64, String)>,
    pub other: std::collections::BTreeMap<String, serde_json::Value>,
}

impl Tef {
    /// The pid of the process named `name`.
    pub fn process(&self, name: &str) -> Option<u64> {
        self.names.iter().find(|n| n.0 == "process_name" && n.3 == name).map(|n| n.1)
    }

    /// The name of thread `tid` of process `pid`.
    pub fn thread(&self, pid: u64, tid: u64) -> Option<&str> {
        self.names.iter().find(|n| n.0 == "thread_name" && n.1 == pid && n.2 == tid).map(|n| n.3.as_str())
    }

    /// The events of category `cat`.
    pub fn of(&self, cat: &str) -> Vec<&Event> {
        self.events.iter().filter(|e| e.cat == cat).collect()
    }
}

/// `rtscope export last --format perfetto` of `db`, read by tef.py; None
/// (said skipped) where python3 is missing. Panics where the export breaks
/// the format.
pub fn perfetto(db: &str, dir: &Path) -> Option<Tef> {
    if !has("python3", Command::new("python3").arg("-V").output().is_ok()) {
        return None;
    }
    let file = dir.join("timeline.json");
    let o = rtscope(&["export", "last", "--format", "perfetto", "-o", file.to_str().unwrap(), "--db", db]);
    assert!(o.status.success(), "{}", text(&o));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perfetto/tef.py");
    let o = Command::new("python3").arg(&script).arg(&file).output().unwrap();
    assert!(o.status.success(), "tef.py found the export outside the Trace Event Format: {}", text(&o));
    let mut tef = Tef::default();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let n = |i: usize| f[i].parse::<u64>().unwrap_or_else(|_| panic!("{line}"));
        match f[0] {
            "meta" => tef.names.push((f[1].into(), n(2), n(3), f[4].into())),
            "ev" => tef.events.push(Event {
                ph: f[1].into(),
                cat: f[2].into(),
                pid: n(3),
                tid: n(4),
                ts_ns: n(5),
                dur_ns: n(6),
                name: f[7].into(),
                args: serde_json::from_str(f[8]).unwrap(),
            }),
            "other" => {
                tef.other.insert(f[1].into(), serde_json::from_str(f[2]).unwrap());
            }
            _ => panic!("tef.py: {line}"),
        }
    }
    Some(tef)
}

/// The writes the marks program logged (`SEQ BEFORE_NS AFTER_NS`).
pub fn marks_log(path: &Path) -> Vec<(u64, u64, u64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<u64> = l.split(' ').filter_map(|x| x.parse().ok()).collect();
            (f.len() == 3).then(|| (f[0], f[1], f[2]))
        })
        .collect()
}

/// Builds tests/data/markers/marks.c into `dir`; None (said skipped)
/// without a C compiler.
pub fn build_marks(dir: &Path) -> Option<PathBuf> {
    let exe = dir.join("marks");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/markers/marks.c");
    match Command::new("gcc").args(["-O2", "-o"]).arg(&exe).arg(&src).output() {
        Ok(o) => assert!(o.status.success(), "gcc: {}", text(&o)),
        Err(e) => {
            has(&format!("gcc ({e})"), false);
            return None;
        }
    }
    Some(exe)
}

/// Every marker the program wrote in `inside` (its own log: `wrote`) is
/// among the exported `markers` (name, CLOCK_MONOTONIC ns) once, in order,
/// at a time between its log's two instants (give or take `tol_ns`).
/// Returns how many were judged.
pub fn check_markers(wrote: &[(u64, u64, u64)], markers: &[(String, u64)], inside: (u64, u64), tol_ns: u64) -> usize {
    let judged: Vec<&(u64, u64, u64)> = wrote.iter().filter(|w| w.1 >= inside.0 && w.2 <= inside.1).collect();
    let ours: std::collections::HashMap<&str, Vec<u64>> =
        markers.iter().filter(|m| m.0.starts_with("rtscope-test-mark ")).fold(Default::default(), |mut m, (n, t)| {
            m.entry(n.as_str()).or_default().push(*t);
            m
        });
    let (mut missing, mut off, mut twice) = (Vec::new(), Vec::new(), Vec::new());
    let (mut last_t, mut order) = (0, true);
    for &&(seq, before, after) in &judged {
        match ours.get(format!("rtscope-test-mark {seq}").as_str()).map(Vec::as_slice) {
            None | Some([]) => missing.push(seq),
            Some(&[t]) => {
                if t + tol_ns < before || t > after + tol_ns {
                    off.push((seq, before, t, after));
                }
                order &= t >= last_t;
                last_t = t;
            }
            Some(_) => twice.push(seq),
        }
    }
    eprintln!(
        "{} markers written inside the run, {} exported; missing {}, off their instants {}, twice {}",
        judged.len(),
        ours.len(),
        missing.len(),
        off.len(),
        twice.len()
    );
    assert!(missing.is_empty() && twice.is_empty(), "missing {missing:?}, twice {twice:?}");
    assert!(
        off.is_empty(),
        "exported off the writer's instants by > {tol_ns} ns (seq, before, exported, after): {off:?}"
    );
    assert!(order, "the markers in the order they were written");
    judged.len()
}

/// tracefs, mounted for the test's length where nobody had it mounted
/// (rtscope then finds it mounted, and leaves it so): its root, and what
/// unmounts it when dropped.
pub fn tracefs_root() -> (PathBuf, Unmount) {
    let (root, mounted) = {
        let _held = rtscope::sys::tracefs::mount_lock();
        rtscope::sys::tracefs::find_or_mount().expect("tracefs")
    };
    (root.clone(), Unmount(root, mounted))
}

/// Unmounts tracefs when dropped, where the test mounted it.
pub struct Unmount(PathBuf, bool);

impl Drop for Unmount {
    fn drop(&mut self) {
        if self.1 {
            let _held = rtscope::sys::tracefs::mount_lock();
            rtscope::sys::tracefs::release(&self.0);
        }
    }
}

/// The marks program (tests/data/markers/marks.c) on the last CPU, writing
/// a marker every millisecond for at most 30 s (or until SIGTERM), its log
/// `marks.log` in `dir`; tracefs mounted meanwhile. None (said skipped)
/// without a C compiler.
pub struct Marks {
    pub child: std::process::Child,
    pub log: PathBuf,
    pub cpu: String,
    _unmount: Unmount,
}

pub fn start_marks(dir: &Path) -> Option<Marks> {
    let exe = build_marks(dir)?;
    let (root, _unmount) = tracefs_root();
    let cpu = last_cpu().to_string();
    let log = dir.join("marks.log");
    let child = Command::new(&exe)
        .args([cpu.as_str(), "1000000", "30"])
        .arg(root.join("trace_marker"))
        .arg(&log)
        .spawn()
        .expect("start the marks program");
    Some(Marks { child, log, cpu, _unmount })
}

/// The task slices of thread `tid` on the CPU whose process is `on`, in
/// time order: (start, end) ns.
pub fn task_slices(tef: &Tef, on: u64, tid: u64) -> Vec<(u64, u64)> {
    let mut s: Vec<(u64, u64)> = tef
        .of("task")
        .iter()
        .filter(|e| e.pid == on && e.args["tid"].as_u64() == Some(tid))
        .map(|e| (e.ts_ns, e.ts_ns + e.dur_ns))
        .collect();
    s.sort_unstable();
    s
}

/// How many of `instants` fall inside one of `slices` (in time order, one
/// after another), give or take `tol_ns`.
pub fn inside_slices(slices: &[(u64, u64)], instants: &[u64], tol_ns: u64) -> usize {
    instants
        .iter()
        .filter(|&&t| {
            let k = slices.partition_point(|s| s.0 <= t + tol_ns);
            k > 0 && slices[k - 1].1 + tol_ns >= t
        })
        .count()
}
