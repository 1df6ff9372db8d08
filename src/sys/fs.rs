//! Reading files from rtscope's helper threads.

use std::path::Path;

/// Bytes per `read`.
const STEP: usize = 16 << 10;

/// A file's text, read `STEP` bytes at a time, for rtscope's helper
/// threads where they share a CPU with a probe: one `read` of a 200 kB
/// file (the symbol cache's) copied it in the kernel in one go, where a
/// `preempt=none` kernel held a SCHED_FIFO probe off for 150 us; such a
/// kernel lets the probe in between two system calls. For a /proc file
/// (a process's maps), each read generates only what it returns.
pub fn read_in_steps(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    let mut step = vec![0u8; STEP];
    loop {
        match f.read(&mut step) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&step[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Whether `a` and `b` name one file: the same file where both exist
/// (links and all), else the same name in the same directory (`./x` and
/// `x`, a directory reached through a link), so that a file yet to be made
/// is told too.
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return ma.dev() == mb.dev() && ma.ino() == mb.ino();
    }
    let place = |p: &Path| {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Some(dir.canonicalize().ok()?.join(p.file_name()?))
    };
    place(a).is_some_and(|pa| Some(pa) == place(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_is_told_by_any_of_its_names() {
        let d = tempfile::tempdir().unwrap();
        let (db, other) = (d.path().join("runs.db"), d.path().join("other.db"));
        std::fs::write(&db, "x").unwrap();
        std::os::unix::fs::symlink(&db, d.path().join("link.db")).unwrap();
        std::os::unix::fs::symlink(d.path(), d.path().join("here")).unwrap();
        assert!(same_file(&db, &db));
        assert!(same_file(&d.path().join("link.db"), &db), "a link to it");
        assert!(same_file(&d.path().join("here/./runs.db"), &db), "through a linked directory");
        assert!(!same_file(&other, &db), "another name, not there yet");
        // Neither made yet: told by their places.
        let new = d.path().join("new.db");
        assert!(same_file(&d.path().join("here/new.db"), &new));
        assert!(!same_file(&d.path().join("new.db-wal"), &new));
        assert!(!same_file(Path::new("/nonexistent-dir/a"), Path::new("/nonexistent-dir/a")), "no such directory");
    }

    /// A file of several steps, a character cut by a step's end among
    /// them, reads whole; a file that is not UTF-8 is an error; a /proc
    /// file (no size) reads to its end.
    #[test]
    fn a_file_is_read_whole_in_steps() {
        let path = std::env::temp_dir().join(format!("rtscope-fs-steps-{}", std::process::id()));
        let text: String = format!("{}é{}", "a".repeat(STEP - 1), "b\tµ\n".repeat(STEP / 2));
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_in_steps(&path).unwrap(), text);
        std::fs::write(&path, [0xffu8, 0xfe]).unwrap();
        assert_eq!(read_in_steps(&path).unwrap_err().kind(), std::io::ErrorKind::InvalidData);
        std::fs::remove_file(&path).unwrap();
        let maps = read_in_steps(Path::new("/proc/self/maps")).unwrap();
        assert!(maps.lines().last().is_some_and(|l| l.contains("[vsyscall]") || l.contains('-')), "{maps}");
        assert!(maps.contains("[stack]"), "{maps}");
    }
}
