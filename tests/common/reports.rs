//! The report tests' helpers: the fixed run (tests/data/report-run.json)
//! imported into a store, a command's output, the snapshots, Markdown
//! tables.

use super::*;
use std::path::{Path, PathBuf};

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Compares `got` with the snapshot `name`, or rewrites it with UPDATE_SNAPSHOTS set.
pub fn snapshot(name: &str, got: &str) {
    let path = data(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} missing: run with UPDATE_SNAPSHOTS=1", path.display()));
    if want != got {
        let new = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.new"));
        std::fs::write(&new, got).unwrap();
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        panic!(
            "{name} differs from its snapshot at line {} (new output in {}; UPDATE_SNAPSHOTS=1 accepts it):\n want: {}\n  got: {}",
            line + 1,
            new.display(),
            want.lines().nth(line).unwrap_or("<end>"),
            got.lines().nth(line).unwrap_or("<end>")
        );
    }
}

/// The fixed run imported into a fresh store.
pub fn imported() -> (TempDir, String) {
    let dir = tempdir();
    let db = db(&dir);
    let o = rtscope(&["import", data("report-run.json").to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    (dir, db)
}

pub fn report(args: &[&str]) -> String {
    let o = rtscope(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// The rows of the Markdown table that follows the line `heading` (a
/// paragraph) in `md`: each row's cells.
pub fn md_table_after(md: &str, heading: &str) -> Vec<Vec<String>> {
    let start = md.find(heading).unwrap_or_else(|| panic!("{heading} missing:\n{md}"));
    md[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter(|l| !l.starts_with("|---"))
        .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
        .collect()
}
