//! Who can read a run store: one that root wrote (0644, in a directory only
//! root can write) is read by any user, read-only, with nothing migrated or
//! written; a corrupt file is called corrupt, never unwritable.

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const NOBODY: u32 = 65534;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// A directory every user can enter and read but only root can write,
/// with a copy of rtscope every user can run (wherever the checkout lives).
struct Shared {
    dir: TempDir,
    bin: PathBuf,
}

impl Shared {
    fn new() -> Shared {
        let dir = tempdir();
        let bin = dir.join("rtscope");
        std::fs::copy(BIN, &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        Shared { dir, bin }
    }

    /// The copy run as nobody. The copy was just written: a child that
    /// another test thread forked meanwhile may still hold it open for
    /// writing until it execs, and exec then fails with ETXTBSY for that
    /// moment; it is tried again.
    fn as_nobody(&self, args: &[&str]) -> Output {
        let mut tries = 0;
        loop {
            match Command::new(&self.bin).args(args).current_dir("/").uid(NOBODY).gid(NOBODY).output() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                r => return r.unwrap(),
            }
        }
    }
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_store_root_wrote_is_read_by_any_user_without_writing_it() {
    let _fx = Fixture::root();
    let sh = Shared::new();
    let db = sh.dir.join("p.db").display().to_string();
    // The fixed run, and a copy of it under another uuid: two runs to compare.
    let o = rtscope(&["import", data("report-run.json").to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("report-run.json")).unwrap()).unwrap();
    run["run"]["uuid"] = "store-access-second".into();
    let second = sh.dir.join("second.json");
    std::fs::write(&second, run.to_string()).unwrap();
    let o = rtscope(&["import", second.to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::read(&db).unwrap();
    let listing = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    let files = listing(&sh.dir);
    let ok = |args: &[&str]| -> String {
        let mut all = args.to_vec();
        all.extend(["--db", &db]);
        let o = sh.as_nobody(&all);
        assert_eq!(o.status.code(), Some(0), "{args:?} as nobody: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let runs = ok(&["runs"]);
    let listed = runs.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())).count();
    assert!(listed == 2 && runs.contains("complete"), "{runs}");
    assert!(ok(&["show", "last"]).contains("wakeup"));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&ok(&["show", "1", "--json"])).unwrap()["run"]["id"], 1);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&ok(&["export", "1"])).unwrap()["format"], "rtscope-run");
    assert!(ok(&["export", "1", "--format", "csv"]).starts_with("run_id,"));
    assert!(ok(&["export", "1", "--format", "hdr"]).contains("Tag=wakeup.latency.cpu"));
    assert!(ok(&["analyze", "last"]).contains("wakeup"));
    assert!(ok(&["report", "1", "-o", "-", "--format", "md"]).contains("wakeup"));
    assert!(ok(&["compare", "1", "2"]).contains("wakeup latency"));
    assert_eq!(std::fs::read(&db).unwrap(), before, "reading as another user must not change the store");
    assert_eq!(listing(&sh.dir), files, "reading as another user must leave no file beside the store");
    // Root still writes it afterwards.
    let o = rtscope(&["runs", "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_store_being_written_is_read_through_its_wal_by_another_user() {
    let _fx = Fixture::root();
    let sh = Shared::new();
    let db = sh.dir.join("p.db");
    let o = rtscope(&["import", data("report-run.json").to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    // A writer holding the store open (as a measuring run does), with a
    // commit still in its -wal file.
    let mut writer = rtscope_model::store::Store::open(&db).unwrap();
    let mut run =
        rtscope_model::export::read_json(&std::fs::read_to_string(data("report-run.json")).unwrap(), "report-run.json")
            .unwrap();
    run.header.uuid = "in-the-wal".into();
    writer.insert_run(&run).unwrap();
    for side in ["-wal", "-shm"] {
        let mut p = db.clone().into_os_string();
        p.push(side);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let o = sh.as_nobody(&["runs", "--db", db.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let listed = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert_eq!(listed, 2, "the committed run in the -wal: {}", text(&o));
    drop(writer);
}

#[test]
fn a_corrupt_store_is_called_corrupt_and_an_unreadable_one_unreadable() {
    let dir = tempdir();
    let bad = dir.join("bad.db");
    let mut bytes = vec![0u8; 8192];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in &mut bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(&bad, &bytes).unwrap();
    let bad_s = bad.to_str().unwrap();
    let corrupt = |o: &Output| {
        assert_eq!(o.status.code(), Some(1), "{}", text(o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("corrupt") && err.contains(bad_s) && err.contains("--db"), "{err}");
        assert!(
            !err.contains("writable") && !err.contains("panicked"),
            "a corrupt file is not a permission problem: {err}"
        );
    };
    // Writable and corrupt: the reading commands and a measuring one.
    for args in [vec!["runs"], vec!["show", "last"], vec!["analyze", "last"], vec!["report", "1", "-o", "-"]] {
        let mut all = args.clone();
        all.extend(["--db", bad_s]);
        corrupt(&rtscope(&all));
    }
    corrupt(&rtscope(&["import", data("report-run.json").to_str().unwrap(), "--db", bad_s]));
    assert_eq!(std::fs::read(&bad).unwrap(), bytes, "a corrupt store is left as it was");
    if is_root() {
        // Unwritable and corrupt: still corrupt, for another user.
        let sh = Shared::new();
        let copy = sh.dir.join("bad.db");
        std::fs::copy(&bad, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644)).unwrap();
        let o = sh.as_nobody(&["runs", "--db", copy.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("corrupt") && !err.contains("writable"), "{err}");
        // Unreadable: says so, with the way out.
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).unwrap();
        let o = sh.as_nobody(&["runs", "--db", copy.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("cannot read run store") && err.contains("--db"), "{err}");
    } else {
        skipped("the parts as another user need root");
    }
}

/// A store damaged past its first pages opens, and fails on a read: that
/// failure names --db and says the store is damaged, as one that does not
/// open at all is called corrupt; never a bare SQLite message.
#[test]
fn a_store_damaged_past_its_first_pages_is_called_damaged() {
    let dir = tempdir();
    let good = dir.join("good.db");
    let o = rtscope(&["import", data("report-run.json").to_str().unwrap(), "--db", good.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let bytes = std::fs::read(&good).unwrap();
    let pages = bytes.len() / 4096;
    let mut failed_after_opening = 0;
    for page in 1..pages {
        // One page overwritten: its b-tree header is no longer one.
        let mut damaged = bytes.clone();
        damaged[page * 4096..(page + 1) * 4096].fill(0xa5);
        let db = dir.join(format!("damaged-{page}.db"));
        std::fs::write(&db, &damaged).unwrap();
        for args in [vec!["runs"], vec!["show", "last"]] {
            let mut all = args.clone();
            all.extend(["--db", db.to_str().unwrap()]);
            let o = rtscope(&all);
            let err = String::from_utf8_lossy(&o.stderr);
            if err.contains("malformed") {
                assert!(err.contains("--db") && !err.contains("writable"), "page {page}, {args:?}: {err}");
                failed_after_opening += usize::from(!err.contains("is corrupt or not an SQLite file"));
            }
        }
    }
    assert!(failed_after_opening > 0, "no damaged page of {pages} failed after the store opened");
}

/// A small tmpfs of the test's own, unmounted (and its directory removed)
/// when dropped.
struct SmallDisk {
    dir: TempDir,
}

impl SmallDisk {
    fn new(size: &str) -> SmallDisk {
        let dir = tempdir();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "rtscope-test"])
            .arg(&*dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        SmallDisk { dir }
    }

    /// Fills it: a file written until the disk says it is full.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.dir.join("filler")).unwrap();
        let block = vec![0x55u8; 64 << 10];
        while f.write_all(&block).is_ok() {}
        let _ = f.write_all(&block[..4096]);
        let _ = f.write_all(&block[..1]);
    }

    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> =
            std::fs::read_dir(&*self.dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&*self.dir).status();
    }
}

/// A disk that fills while a run is measured: the run ends `failed` at
/// once with the note "the disk holding STORE is full", its data up to
/// the last checkpoint kept, and the message says so with the fix; a
/// monitor says the same. A new store on a full disk says it and leaves
/// no file; SQLite's codes never come without words. Root (mount).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_disk_that_fills_is_named_and_the_run_kept() {
    let fx = Fixture::root();
    let disk = SmallDisk::new("3m");
    let db = disk.dir.join("runs.db");
    let db_s = db.to_str().unwrap();
    let cpu = last_cpu().to_string();
    let child = Command::new(BIN)
        .args(["wakeup", "--cpus", &cpu, "-D", "60s", "--checkpoint", "200ms", "--quiet", "--db", db_s])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !rtscope_model::store::Store::open_for_reading(&db)
        .and_then(|s| Ok(s.load_run(1)?.series.first().map_or(0, |s| s.intervals.len())))
        .is_ok_and(|n| n >= 3)
    {
        assert!(std::time::Instant::now() < until, "no checkpoint stored in 30 s");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    disk.fill();
    let t = std::time::Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(t.elapsed() < std::time::Duration::from_secs(20), "the run went on for {:?} on a full disk", t.elapsed());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(err.contains(&format!("the disk holding the run store {db_s} is full")) && err.contains("--db"), "{err}");
    std::fs::remove_file(disk.dir.join("filler")).unwrap();
    let store = rtscope_model::store::Store::open_for_reading(&db).unwrap();
    let run = store.load_run(1).unwrap();
    assert_eq!(run.header.status.as_str(), "failed", "{:?}", run.header.notes);
    assert!(
        run.header.notes.iter().any(|n| n.contains(&format!("the disk holding the run store {db_s} is full"))),
        "{:?}",
        run.header.notes
    );
    assert!(!run.header.notes.iter().any(|n| n.contains("the process died")), "{:?}", run.header.notes);
    assert!(run.series[0].intervals.len() >= 3 && run.series[0].total().count() > 0);
    drop(store);

    // A monitor on a full disk says the same.
    let port = common::prom::free_port().to_string();
    let mut mon = Command::new(BIN)
        .args(["monitor", "--cpus", &cpu, "--checkpoint", "200ms", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--db", db_s])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    disk.fill();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while mon.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = mon.kill();
            panic!("the monitor went on for 20 s on a full disk");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let o = mon.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("the disk holding the run store {db_s} is full")), "{err}");
    assert!(!err.contains("Error code") || err.contains("full"), "{err}");

    // A new store on the full disk: named, and nothing left beside it.
    disk.fill();
    let before = disk.files();
    let new = disk.dir.join("new.db");
    let o = rtscope(&["wakeup", "--cpus", &cpu, "-D", "1s", "--db", new.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is full"), "{}", text(&o));
    assert_eq!(disk.files(), before, "files left beside new.db");
    drop(fx);
}
