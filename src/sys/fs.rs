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

/// File systems whose files have no fixed size and may never end (their
/// `stat` says 0 bytes, a read generates what it returns, some block):
/// procfs, sysfs, tracefs, debugfs, securityfs, cgroup (v1 and v2),
/// configfs. `statfs`'s `f_type`, with the name a message gives.
const PSEUDO_FS: [(u64, &str); 8] = [
    (0x9fa0, "/proc"),
    (0x6265_6572, "/sys"),
    (0x7472_6163, "tracefs"),
    (0x6462_6720, "debugfs"),
    (0x7363_6673, "securityfs"),
    (0x0027_e0eb, "a cgroup file system"),
    (0x6367_7270, "a cgroup file system"),
    (0x6265_6570, "configfs"),
];

/// The bytes of the input file `path` (a plan, a campaign file, a sample
/// file, an export to import, a task file, a web configuration, its
/// certificate and key): the one place where rtscope reads what the user
/// names, bounded by what it is. Refused with a message that starts with
/// `what` (the flag and the file as given) and says the fix:
/// - what is not a regular file (a directory, a device such as
///   `/dev/zero`, a FIFO, a socket), opened without blocking so that a
///   FIFO nobody writes to does not hold rtscope;
/// - a file of /proc, /sys or another pseudo file system, whose size is
///   unknown until it is read;
/// - a file larger than half of the memory available (`fix_big` says
///   what to do instead), or one that grows past it while it is read.
pub fn read_input(path: &Path, what: &str, fix_big: &str) -> Result<Vec<u8>, String> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::io::Read;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| {
        let e = std::io::Error::from(e);
        format!("{what}: cannot read it: {e}")
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("{what}: cannot read it: {e}"))?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => None,
        FileType::Directory => Some("a directory"),
        FileType::CharacterDevice => Some("a character device"),
        FileType::BlockDevice => Some("a block device"),
        FileType::Fifo => Some("a pipe (FIFO)"),
        FileType::Socket => Some("a socket"),
        _ => Some("not a regular file"),
    };
    if let Some(kind) = kind {
        return Err(format!(
            "{what}: it is {kind}, not a regular file: give a file (to read a pipe or a device, save what it \
             gives to a file first, e.g. `head -c 10M DEVICE > FILE`)"
        ));
    }
    if let Ok(fs) = rustix::fs::fstatfs(&fd)
        && let Some((_, name)) = PSEUDO_FS.iter().find(|(t, _)| *t == fs.f_type as u64)
    {
        return Err(format!(
            "{what}: it is a file of {name}, whose size is unknown until it is read: copy it to a regular file \
             first (`cp FILE copy`) and give the copy"
        ));
    }
    let limit = super::mem::available_bytes().map_or(u64::MAX, |a| a / 2);
    let size = st.st_size.max(0) as u64;
    super::mem::check_share(what, size, fix_big)?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(size as usize).map_err(|e| format!("{what}: cannot allocate {size} bytes: {e}"))?;
    let file = std::fs::File::from(fd);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| format!("{what}: cannot read it: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{what}: it grew past {} while it was read (more than {} allows): {fix_big}",
            super::mem::human_bytes(limit),
            super::mem::SHARE
        ));
    }
    Ok(bytes)
}

/// [`read_input`] of a text file: refused, naming it, when it is not
/// UTF-8.
pub fn read_input_text(path: &Path, what: &str, fix_big: &str) -> Result<String, String> {
    String::from_utf8(read_input(path, what, fix_big)?)
        .map_err(|e| format!("{what}: it is not text (UTF-8): {e}; give a text file"))
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

    /// What is not a regular file is refused at once, naming it and the
    /// fix, a FIFO nobody writes to included (it would block the open);
    /// so is a /proc file; a regular file is read whole.
    #[test]
    fn inputs_are_bounded_by_what_they_are() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
        let e = |p: &Path| read_input(p, "--x F", "split it").unwrap_err();
        let t = std::time::Instant::now();
        assert!(e(&fifo).contains("--x F: it is a pipe (FIFO)"), "{}", e(&fifo));
        assert!(t.elapsed() < std::time::Duration::from_secs(2), "the open of a FIFO blocked");
        assert!(e(Path::new("/dev/zero")).contains("a character device"), "{}", e(Path::new("/dev/zero")));
        assert!(e(d.path()).contains("a directory"));
        assert!(e(Path::new("/proc/self/status")).contains("/proc"), "{}", e(Path::new("/proc/self/status")));
        assert!(e(&d.path().join("none")).contains("cannot read it"));
        let f = d.path().join("f.txt");
        std::fs::write(&f, "1\n2\n").unwrap();
        assert_eq!(read_input_text(&f, "--x F", "").unwrap(), "1\n2\n");
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert!(read_input_text(&f, "--x F", "").unwrap_err().contains("not text"));
    }

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
