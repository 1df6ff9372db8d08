//! The executable mappings of the processes whose code a wake-up's stack
//! shows, read from `/proc/PID/maps` as soon as the reader sees the
//! process, not when its episode is named. A short-lived process (a
//! compiler, a package manager's helper, a shell's child) has often exited
//! by then, and its frames could no longer be named. Each mapped file is
//! held open from that moment (through `/proc/PID/map_files`), so that it
//! can still be read when the process has exited and the file has been
//! replaced (a package upgrade) or deleted since; a file not held is read
//! by its path only while that is still the same inode.
//!
//! Where the kernel's side-band records are read ([`crate::sys::perf::MapWatch`]),
//! a process's executable mappings and its `exec` are also told as they
//! happen: a process that lived a few milliseconds, under the reader's
//! 10 ms pass, is named too.
//!
//! A process is known by its pid: the kernel reuses a pid only after it
//! has gone round `pid_max`, and the oldest processes are forgotten first.
//! A process that ran `exec` after it was read (or a pid reused) maps its
//! code elsewhere (address space layout randomisation): the reader hands
//! over each wake-up stack's first user address, and one that no mapping
//! holds has the process read again while it lives.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// At most this many processes' mappings are kept: the oldest go first.
const MAX_PROCS: usize = 8192;
/// At most this many mapped files are held open (the rest by their path),
/// and only while the process has under half its descriptors open.
const MAX_OPEN: usize = 256;
/// A live process is read again for an address its mappings miss, met
/// while naming, at most this often; for one a wake-up showed, at most
/// every `RESEEN` (code mapped and unmapped by a JIT).
const REREAD: Duration = Duration::from_secs(1);
const RESEEN: Duration = Duration::from_millis(100);

/// One executable mapping: `[start, end)` of the address space shows
/// `file` (an index for [`ProcMaps::file`]) from `offset` on; no file for
/// the vDSO (`vdso`) or a JIT's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub file: Option<usize>,
    pub vdso: bool,
}

/// Where a user address lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Located {
    /// In file `.0` (an index for [`ProcMaps::file`]), at offset `.1`.
    File(usize, u64),
    /// In executable memory that is no file (the vDSO, a JIT's code): only
    /// the live process can name it.
    NoFile,
}

/// A mapped file.
#[derive(Debug)]
pub struct MappedFile {
    /// Its path as the process mapped it (in its mount namespace).
    path: PathBuf,
    /// Its file name: the frames' module.
    pub name: String,
    /// Its inode, as the process's maps gave it.
    ino: u64,
    /// The file held open, with its device and inode.
    open: Option<(File, u64, u64)>,
    /// Its build ID, once read (`Some(None)`: it has none).
    build: Option<Option<Vec<u8>>>,
}

impl MappedFile {
    /// Its path as the process mapped it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path to read the file by: its own while it is still the file
    /// that was mapped (so that its separate debug file is found beside
    /// it), else the descriptor held open; None when neither (it was
    /// replaced or deleted before it could be held, or lies in another
    /// mount namespace): another file's names would be wrong.
    pub fn read_path(&self) -> Option<PathBuf> {
        let at_path = std::fs::metadata(&self.path).ok();
        match &self.open {
            Some((f, dev, ino)) => {
                if at_path.is_some_and(|m| m.dev() == *dev && m.ino() == *ino) {
                    Some(self.path.clone())
                } else {
                    use std::os::fd::AsRawFd;
                    Some(PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())))
                }
            }
            None => at_path.filter(|m| m.ino() == self.ino).map(|_| self.path.clone()),
        }
    }
}

/// The last part of a path: a frame's module, its source file.
pub fn file_name(p: &std::ffi::OsStr) -> String {
    Path::new(p).file_name().unwrap_or(p).to_string_lossy().into_owned()
}

/// What one process maps, and when it was read.
struct Proc {
    maps: Vec<Mapping>,
    read: Instant,
    /// All of its mappings are known: read from its maps, or told from its
    /// `exec` on; else only those the kernel told since the start.
    whole: bool,
    /// Its mappings before its last `exec` (or before they were read
    /// again): a wake-up that came inside `execve` shows the old image's
    /// user frames, the call of `execve`.
    before: Vec<Mapping>,
    /// Its files were held open (a wake-up showed it).
    held: bool,
    /// Changed each time its mappings change (see [`ProcMaps::mappings`]).
    stamp: u64,
}

impl Proc {
    fn new(maps: Vec<Mapping>, whole: bool) -> Proc {
        Proc { maps, read: Instant::now(), whole, before: Vec::new(), held: false, stamp: 0 }
    }
}

/// The processes met so far and their mapped files.
#[derive(Default)]
pub struct ProcMaps {
    procs: HashMap<i32, Proc>,
    /// Pids in the order they were first read, to forget the oldest.
    order: VecDeque<i32>,
    files: Vec<MappedFile>,
    /// (device as maps writes it, inode) -> index into `files`.
    by_inode: HashMap<(String, u64), usize>,
    held: usize,
    /// The last stamp given to a process's mappings.
    stamp: u64,
}

/// One line of `/proc/PID/maps` that maps memory executable: start, end,
/// file offset, the file's device, inode and path (" (deleted)" taken
/// off) where it is a file, and whether it is the vDSO.
type Line<'a> = (u64, u64, u64, Option<(&'a str, u64, &'a str)>, bool);

/// The name the kernel gives the vDSO's mapping.
const VDSO: &str = "[vdso]";

fn parse_line(l: &str) -> Option<Line<'_>> {
    let mut it = l.splitn(6, ' ');
    let (range, perms, offset, dev, inode) = (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
    if perms.as_bytes().get(2) != Some(&b'x') {
        return None;
    }
    let path = it.next().unwrap_or_default().trim_start();
    let (start, end) = range.split_once('-')?;
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let inode: u64 = inode.parse().ok()?;
    let file =
        (inode != 0 && path.starts_with('/')).then(|| (dev, inode, path.strip_suffix(" (deleted)").unwrap_or(path)));
    Some((hex(start)?, hex(end)?, hex(offset)?, file, path == VDSO))
}

impl ProcMaps {
    /// Reads the mappings of `pid` unless they are known. False: the
    /// process is gone (or its maps cannot be read) and nothing of it was
    /// known.
    pub fn seen(&mut self, pid: i32) -> bool {
        self.procs.get(&pid).is_some_and(|p| p.whole) || self.read(pid) || self.procs.contains_key(&pid)
    }

    /// The offset of `addr` of `pid` in its vDSO; None where it is not in
    /// its vDSO's mapping.
    pub fn vdso_offset(&self, pid: i32, addr: u64) -> Option<u64> {
        let p = self.procs.get(&pid)?;
        p.maps.iter().chain(&p.before).find(|m| m.vdso && (m.start..m.end).contains(&addr)).map(|m| addr - m.start)
    }

    /// `pid` ran `exec` (the kernel's side-band record, [`crate::sys::perf::MapWatch`]):
    /// its mappings from now on are those the kernel tells.
    pub fn exec(&mut self, pid: i32) {
        self.insert(pid, Proc::new(Vec::new(), true));
    }

    /// What the kernel told of a process ([`crate::sys::perf::MapWatch`]), in
    /// the order it happened.
    pub fn told(&mut self, e: crate::sys::perf::MapEvent) {
        use crate::sys::perf::MapEvent;
        match e {
            MapEvent::Exec(pid) => self.exec(pid),
            MapEvent::Fork { parent, child } => self.fork(parent, child),
            MapEvent::Mmap(m) => self.mapped(&m),
            // Some were lost: no process is known whole from them any more
            // (each is read from /proc again when a wake-up shows it).
            MapEvent::Lost => self.procs.values_mut().for_each(|p| p.whole = false),
        }
    }

    /// `child` was forked from `parent` (the kernel's side-band record):
    /// it maps what its parent did, as far as that is known.
    pub fn fork(&mut self, parent: i32, child: i32) {
        if let Some(p) = self.procs.get(&parent) {
            let p = Proc::new(p.maps.clone(), p.whole);
            self.insert(child, p);
            // A pid used again: what it mapped before was another process's.
            if let Some(c) = self.procs.get_mut(&child) {
                c.before.clear();
            }
        }
    }

    /// `m.pid` mapped executable memory (the kernel's side-band record,
    /// told as it happened: also of a process that lived a few
    /// milliseconds): it replaces what it overlaps, its file held open
    /// while the process lives.
    pub fn mapped(&mut self, m: &crate::sys::perf::Mmap2) {
        let (start, end) = (m.start, m.start.saturating_add(m.len));
        let dev = format!("{:02x}:{:02x}", m.maj, m.min);
        let path = m.path.strip_suffix(" (deleted)").unwrap_or(&m.path);
        let file = (m.ino != 0 && path.starts_with('/'))
            .then(|| self.file_index(m.pid, (start, end), (&dev, m.ino, path), false));
        if !self.procs.contains_key(&m.pid) {
            self.insert(m.pid, Proc::new(Vec::new(), false));
        }
        if let Some(p) = self.procs.get_mut(&m.pid) {
            // What it overlaps keeps only its parts outside it, as the
            // kernel splits a mapping mapped over.
            let mut maps: Vec<Mapping> = Vec::with_capacity(p.maps.len() + 2);
            for x in p.maps.drain(..) {
                if x.end <= start || x.start >= end {
                    maps.push(x);
                    continue;
                }
                if x.start < start {
                    maps.push(Mapping { end: start, ..x });
                }
                if x.end > end {
                    maps.push(Mapping { start: end, offset: x.offset + (end - x.start), ..x });
                }
            }
            maps.push(Mapping { start, end, offset: m.pgoff, file, vdso: m.path == VDSO });
            maps.sort_unstable_by_key(|x| x.start);
            p.maps = maps;
            self.stamp += 1;
            p.stamp = self.stamp;
        }
    }

    /// Reads the mappings of `pid` unless they are known and hold `addr`
    /// (its user code seen at a wake-up: an address they miss is an `exec`
    /// since, a library loaded since, or a pid reused).
    pub fn seen_at(&mut self, pid: i32, addr: u64) {
        let recent = self.procs.get(&pid).is_some_and(|p| p.whole && p.read.elapsed() < RESEEN);
        if self.locate(pid, addr).is_none() && !recent {
            self.read(pid);
        }
        self.hold_files(pid);
    }

    /// Reads the mappings of `pid` again if it lives and they were read
    /// over a second ago (an address they miss, met while naming). True
    /// when they were.
    pub fn refresh(&mut self, pid: i32) -> bool {
        match self.procs.get(&pid) {
            Some(p) if p.whole && p.read.elapsed() < REREAD => false,
            _ => self.read(pid),
        }
    }

    fn read(&mut self, pid: i32) -> bool {
        if pid <= 0 {
            return false;
        }
        let path = format!("/proc/{pid}/maps");
        let Ok(text) = crate::sys::fs::read_in_steps(path.as_ref()) else { return false };
        let maps = self.parse(pid, &text);
        self.insert(pid, Proc::new(maps, true));
        true
    }

    /// Keeps `p` as `pid`'s (what it replaces as its mappings before), the
    /// oldest process forgotten past MAX_PROCS.
    fn insert(&mut self, pid: i32, mut p: Proc) {
        if let Some(old) = self.procs.get_mut(&pid) {
            p.before = std::mem::take(&mut old.maps);
        }
        self.stamp += 1;
        p.stamp = self.stamp;
        if self.procs.insert(pid, p).is_none() {
            self.order.push_back(pid);
            while self.order.len() > MAX_PROCS {
                if let Some(old) = self.order.pop_front() {
                    self.procs.remove(&old);
                }
            }
        }
    }

    /// The executable mappings of `text` (`pid`'s maps), sorted, each file
    /// met for the first time opened.
    fn parse(&mut self, pid: i32, text: &str) -> Vec<Mapping> {
        let mut maps: Vec<Mapping> = text
            .lines()
            .filter_map(parse_line)
            .map(|(start, end, offset, file, vdso)| {
                let file = file.map(|(dev, ino, path)| self.file_index(pid, (start, end), (dev, ino, path), true));
                Mapping { start, end, offset, file, vdso }
            })
            .collect();
        maps.sort_unstable_by_key(|m| m.start);
        maps
    }

    /// The index of the file that `pid` maps at `range`, added (and held
    /// open, while there is room) the first time it is met.
    /// `open`: hold the file open now (a process a wake-up showed); a
    /// mapping the kernel told of any process is only noted, its file held
    /// when a wake-up shows that process ([`ProcMaps::hold_files`]).
    fn file_index(&mut self, pid: i32, range: (u64, u64), (dev, ino, path): (&str, u64, &str), open: bool) -> usize {
        let i = match self.by_inode.get(&(dev.to_string(), ino)) {
            Some(&i) => i,
            None => {
                let name = file_name(path.as_ref());
                self.files.push(MappedFile { path: PathBuf::from(path), name, ino, open: None, build: None });
                self.by_inode.insert((dev.to_string(), ino), self.files.len() - 1);
                self.files.len() - 1
            }
        };
        if open && self.files[i].open.is_none() && self.held < MAX_OPEN && fd_room() {
            self.files[i].open = hold(pid, range, ino, path);
            self.held += usize::from(self.files[i].open.is_some());
        }
        i
    }

    /// Holds open the files `pid` maps that are not held yet, once per
    /// process (while it lives: through its mappings).
    fn hold_files(&mut self, pid: i32) {
        let Some(p) = self.procs.get_mut(&pid).filter(|p| !p.held) else { return };
        p.held = true;
        let todo: Vec<(u64, u64, usize)> = p.maps.iter().filter_map(|m| Some((m.start, m.end, m.file?))).collect();
        for (start, end, f) in todo {
            if self.files[f].open.is_none() && self.held < MAX_OPEN && fd_room() {
                let (ino, path) = (self.files[f].ino, self.files[f].path.to_string_lossy().into_owned());
                self.files[f].open = hold(pid, (start, end), ino, &path);
                self.held += usize::from(self.files[f].open.is_some());
            }
        }
    }

    /// Where `addr` of `pid` lies; None: outside every executable mapping
    /// known (or the process is not known). Its mappings now first, then
    /// those before its last `exec`.
    pub fn locate(&self, pid: i32, addr: u64) -> Option<Located> {
        let p = self.procs.get(&pid)?;
        let within = |maps: &[Mapping]| {
            let m = maps[maps.partition_point(|m| m.start <= addr).checked_sub(1)?];
            (addr < m.end).then(|| match m.file {
                Some(f) => Located::File(f, addr - m.start + m.offset),
                None => Located::NoFile,
            })
        };
        within(&p.maps).or_else(|| within(&p.before))
    }

    /// The address at which `pid` maps offset `off` of file `file`.
    #[cfg(test)]
    pub fn address_of(&self, pid: i32, file: usize, off: u64) -> Option<u64> {
        let maps = &self.procs.get(&pid)?.maps;
        maps.iter()
            .find(|m| m.file == Some(file) && (m.offset..m.offset + (m.end - m.start)).contains(&off))
            .map(|m| m.start + off - m.offset)
    }

    /// The executable mappings of `pid` now, sorted, and their stamp: it
    /// changes whenever they do (an `exec`, a mapping told, a new read).
    pub fn mappings(&self, pid: i32) -> Option<(u64, &[Mapping])> {
        self.procs.get(&pid).map(|p| (p.stamp, p.maps.as_slice()))
    }

    pub fn file(&self, i: usize) -> &MappedFile {
        &self.files[i]
    }

    /// The build ID of file `i`, read once (none from a file that cannot
    /// be read as the one mapped).
    pub fn build_id(&mut self, i: usize) -> Option<&[u8]> {
        let f = &mut self.files[i];
        if f.build.is_none() {
            let id = f.read_path().and_then(|p| blazesym::helper::read_elf_build_id(&p).ok().flatten());
            f.build = Some(id.map(|b| b.to_vec()));
        }
        f.build.as_ref().and_then(|b| b.as_deref()).filter(|b| !b.is_empty())
    }
}

/// Whether this process has under half of its open-files limit open: the
/// files held never starve the trace buffers and the store of descriptors.
/// The limit is read once: rtscope never changes it.
fn fd_room() -> bool {
    static LIMIT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let limit = *LIMIT.get_or_init(|| {
        std::fs::read_to_string("/proc/self/limits").ok().and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse::<usize>().ok())
        })
    });
    let open = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).ok();
    matches!((limit, open), (Some(l), Some(o)) if o < l / 2)
}

/// Opens the file (inode `ino`) that `pid` maps at `[start, end)`: through
/// the mapping itself (it works in another mount namespace and for a
/// deleted file), else by its path in the process's root, if that is
/// still the same inode.
fn hold(pid: i32, (start, end): (u64, u64), ino: u64, path: &str) -> Option<(File, u64, u64)> {
    let f = File::open(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
        .or_else(|_| File::open(format!("/proc/{pid}/root{path}")))
        .ok()?;
    let m = f.metadata().ok().filter(|m| m.ino() == ino)?;
    Some((f, m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_executable_mappings_files_and_others() {
        let text = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fe:00 247030                     /usr/bin/cat
55d0c0a02000-55d0c0a07000 r-xp 00002000 fe:00 247030                     /usr/bin/cat
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7f1000000000-7f1000100000 r-xp 00028000 fe:00 1234                       /usr/lib/lib x.so (deleted)
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
7f3000000000-7f3000004000 rwxp 00000000 00:00 0
7f2000000000-7f2000001000 r-xp 00000000 00:05 77                         /memfd:jit (deleted)";
        let lines: Vec<_> = text.lines().filter_map(parse_line).collect();
        assert_eq!(
            lines,
            vec![
                (0x55d0c0a02000, 0x55d0c0a07000, 0x2000, Some(("fe:00", 247030, "/usr/bin/cat")), false),
                (0x7f1000000000, 0x7f1000100000, 0x28000, Some(("fe:00", 1234, "/usr/lib/lib x.so")), false),
                (0x7ffd00000000, 0x7ffd00002000, 0, None, true),
                (0x7f3000000000, 0x7f3000004000, 0, None, false),
                (0x7f2000000000, 0x7f2000001000, 0, Some(("00:05", 77, "/memfd:jit")), false),
            ]
        );
        let mut m = ProcMaps::default();
        let maps = m.parse(-1, text);
        m.procs.insert(7, Proc::new(maps, true));
        assert_eq!(m.locate(7, 0x55d0c0a02000), Some(Located::File(0, 0x2000)), "the start is inside");
        assert_eq!(m.locate(7, 0x55d0c0a02010), Some(Located::File(0, 0x2010)));
        assert_eq!(m.locate(7, 0x7f1000000100), Some(Located::File(1, 0x28100)));
        assert_eq!(m.file(1).name, "lib x.so");
        assert_eq!(m.file(1).read_path(), None, "neither held nor at its path");
        assert_eq!(m.locate(7, 0x55d0c0a07000), None, "the end is outside");
        assert_eq!(m.locate(7, 0x7ffd00000010), Some(Located::NoFile), "the vDSO is no file");
        assert_eq!(m.locate(7, 0x7f3000000010), Some(Located::NoFile), "nor is a JIT's code");
        assert_eq!(m.locate(7, 0x1000), None);
        assert_eq!(m.locate(8, 0x55d0c0a02010), None, "an unknown process");
        let (_, maps) = m.mappings(7).unwrap();
        assert_eq!(maps.iter().filter(|x| x.vdso).map(|x| x.start).collect::<Vec<_>>(), [0x7ffd00000000]);
        assert_eq!(m.address_of(7, 1, 0x28100), Some(0x7f1000000100));
    }

    /// This process's own code: found in its executable, held open, read
    /// by its own path while that is the same file.
    #[test]
    fn finds_this_process_code_in_its_executable() {
        let mut m = ProcMaps::default();
        let pid = std::process::id() as i32;
        assert!(m.seen(pid));
        let f = keeps_executable_mappings_files_and_others as *const () as u64;
        let Some(Located::File(i, off)) = m.locate(pid, f) else { panic!("this test's code is mapped") };
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(m.file(i).name, exe.file_name().unwrap().to_string_lossy());
        assert!(m.file(i).open.is_some(), "held open");
        assert_eq!(m.file(i).read_path(), Some(exe));
        assert_eq!(m.address_of(pid, i, off), Some(f), "the offset maps back to the address");
        assert!(!m.seen(-5), "no such process");
    }

    /// A file deleted after the process was seen, the process gone: still
    /// read, through the descriptor held since.
    #[test]
    fn reads_a_deleted_file_of_an_exited_process() {
        let sleep = ["/usr/bin/sleep", "/bin/sleep"].into_iter().map(Path::new).find(|p| p.exists());
        let sleep = sleep.expect("coreutils' sleep");
        // Beside the test binary (its directory allows exec, /tmp may not);
        // removed however the test ends.
        struct Gone(PathBuf);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let exe = std::env::current_exe().unwrap();
        let dir = Gone(exe.parent().unwrap().join(format!("rtscope-procmaps-{}", std::process::id())));
        std::fs::create_dir_all(&dir.0).unwrap();
        let copy = dir.0.join("sleepy");
        std::fs::copy(sleep, &copy).unwrap();
        // A fork elsewhere in the test binary can hold the copy's write
        // descriptor a moment (ETXTBSY): try again.
        let mut spawned = std::process::Command::new(&copy).arg("30").spawn();
        for _ in 0..50 {
            match &spawned {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(Duration::from_millis(20));
                    spawned = std::process::Command::new(&copy).arg("30").spawn();
                }
                _ => break,
            }
        }
        let mut child = spawned.expect("the copy runs");
        let pid = child.id() as i32;
        let mut m = ProcMaps::default();
        let mut exe = None;
        for _ in 0..200 {
            // Once exec has mapped the copy.
            m.read(pid);
            exe = (0..m.files.len()).find(|&i| m.file(i).name == "sleepy");
            if exe.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let exe = exe.expect("the copy is mapped");
        std::fs::remove_file(&copy).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let path = m.file(exe).read_path().expect("held open");
        assert!(path.starts_with("/proc/self/fd/"), "{path:?}");
        if blazesym::helper::read_elf_build_id(&sleep).ok().flatten().is_some() {
            assert!(m.build_id(exe).is_some(), "its build ID read through the descriptor");
        }
    }

    /// The kernel's records build a process's mappings as they come: an
    /// exec starts them anew and keeps the old ones for a wake-up inside
    /// `execve`, a mapping replaces what it overlaps, and a process known
    /// only from records since the start is not whole.
    #[test]
    fn told_mappings_follow_exec_and_overlap() {
        let told = |start: u64, len: u64, ino: u64, path: &str| crate::sys::perf::Mmap2 {
            pid: -5,
            start,
            len,
            pgoff: 0x1000,
            maj: 0xfe,
            min: 0,
            ino,
            path: path.into(),
        };
        let mut m = ProcMaps::default();
        m.mapped(&told(0x1000, 0x1000, 11, "/old/sh"));
        assert!(!m.procs[&-5].whole, "told since the start only");
        let Some(Located::File(old, 0x1800)) = m.locate(-5, 0x1800) else { panic!("{:?}", m.locate(-5, 0x1800)) };
        assert_eq!(m.file(old).name, "sh");
        m.fork(-5, -6);
        assert_eq!(m.locate(-6, 0x1800), Some(Located::File(old, 0x1800)), "a child maps its parent's");
        m.fork(-99, -7);
        assert!(!m.procs.contains_key(&-7), "nothing known of its parent");
        // A pid used again keeps nothing of the process that had it.
        m.mapped(&crate::sys::perf::Mmap2 { pid: -8, ..told(0x8000, 0x1000, 14, "/usr/bin/gone") });
        m.fork(-5, -8);
        assert_eq!(m.locate(-8, 0x8100), None, "not the old process's code");
        let stamp = m.mappings(-5).unwrap().0;
        m.exec(-5);
        assert!(m.procs[&-5].whole);
        assert_ne!(m.mappings(-5).unwrap().0, stamp, "an exec changes the stamp");
        m.mapped(&told(0x4000, 0x2000, 12, "/usr/bin/ls (deleted)"));
        m.mapped(&told(0x9000, 0x1000, 0, "[vdso]"));
        let stamp = m.mappings(-5).unwrap().0;
        m.mapped(&told(0x9000, 0x1000, 0, "[vdso]"));
        assert_ne!(m.mappings(-5).unwrap().0, stamp, "a mapping changes the stamp");
        assert!(m.mappings(-5).unwrap().1.iter().any(|x| x.vdso && x.start == 0x9000), "the vDSO told");
        let Some(Located::File(new, 0x1100)) = m.locate(-5, 0x4100) else { panic!() };
        assert_eq!(m.file(new).name, "ls");
        assert_eq!(m.locate(-5, 0x9010), Some(Located::NoFile));
        assert_eq!(m.locate(-5, 0x1800), Some(Located::File(old, 0x1800)), "the old image, inside execve");
        // A new mapping over part of an old one replaces that part.
        m.mapped(&told(0x5000, 0x800, 13, "/usr/lib/libx.so"));
        assert_eq!(m.locate(-5, 0x4100), Some(Located::File(new, 0x1100)));
        let Some(Located::File(x, 0x1100)) = m.locate(-5, 0x5100) else { panic!() };
        assert_eq!(m.file(x).name, "libx.so");
        assert_eq!(m.locate(-5, 0x5900), Some(Located::File(new, 0x2900)), "the rest of ls, its offset kept");
        // Told mappings note their files without holding them.
        assert!(m.files.iter().all(|f| f.open.is_none()));
        // Records lost: nothing is whole from them any more.
        m.told(crate::sys::perf::MapEvent::Lost);
        assert!(m.procs.values().all(|p| !p.whole));
    }
}
