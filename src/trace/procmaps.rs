//! The executable file mappings of the processes whose code a stack or a
//! sample shows, read from `/proc/PID/maps` as soon as the reader sees the
//! process, not when its episode is named. A short-lived process (a
//! compiler, a package manager's helper, a shell's child) has often exited
//! by then, and its frames could no longer be named. Each mapped file is
//! held open from that moment (through `/proc/PID/map_files`), so that it
//! can still be read when the process has exited and the file has been
//! replaced (a package upgrade) or deleted since.
//!
//! A process is known by its pid: the kernel reuses a pid only after it
//! has gone round `pid_max`, and the oldest processes are forgotten first.
//! A process that ran `exec` after it was read maps its code elsewhere
//! (address space layout randomisation): an address no mapping holds has
//! the process read again while it lives.

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
/// A live process is read again for an address its mappings miss at most
/// this often.
const REREAD: Duration = Duration::from_secs(1);

/// One executable mapping: `[start, end)` of the address space shows
/// `file` from `offset` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    file: usize,
}

/// A mapped file.
#[derive(Debug)]
pub struct MappedFile {
    /// Its path as the process mapped it (in its mount namespace).
    path: PathBuf,
    /// Its file name: the frames' module.
    pub name: String,
    /// The file held open, with its device and inode.
    open: Option<(File, u64, u64)>,
    /// Its build ID, once read (`Some(None)`: it has none).
    build: Option<Option<Vec<u8>>>,
}

impl MappedFile {
    /// The path to read the file by: its own while it is still the file
    /// that was mapped (so that its separate debug file is found beside
    /// it), else the descriptor held open.
    pub fn read_path(&self) -> PathBuf {
        match &self.open {
            Some((f, dev, ino)) => {
                let same = std::fs::metadata(&self.path).is_ok_and(|m| m.dev() == *dev && m.ino() == *ino);
                if same {
                    self.path.clone()
                } else {
                    use std::os::fd::AsRawFd;
                    PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()))
                }
            }
            None => self.path.clone(),
        }
    }
}

/// What one process maps, and when it was read.
struct Proc {
    maps: Vec<Mapping>,
    read: Instant,
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
}

/// One line of `/proc/PID/maps` that maps a file executable: start, end,
/// file offset, device, inode, path (" (deleted)" taken off).
fn parse_line(l: &str) -> Option<(u64, u64, u64, &str, u64, &str)> {
    let mut it = l.splitn(6, ' ');
    let (range, perms, offset, dev, inode) = (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
    let path = it.next()?.trim_start();
    if perms.as_bytes().get(2) != Some(&b'x') || !path.starts_with('/') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let inode: u64 = inode.parse().ok()?;
    if inode == 0 {
        return None;
    }
    Some((hex(start)?, hex(end)?, hex(offset)?, dev, inode, path.strip_suffix(" (deleted)").unwrap_or(path)))
}

impl ProcMaps {
    /// Reads the mappings of `pid` unless they are known. False: the
    /// process is gone (or its maps cannot be read) and was not known.
    pub fn seen(&mut self, pid: i32) -> bool {
        self.procs.contains_key(&pid) || self.read(pid)
    }

    /// Reads the mappings of `pid` again if it lives and they were read
    /// over a second ago (an address they miss: a library loaded since, or
    /// an `exec`). True when they were.
    pub fn refresh(&mut self, pid: i32) -> bool {
        match self.procs.get(&pid) {
            Some(p) if p.read.elapsed() < REREAD => false,
            _ => self.read(pid),
        }
    }

    fn read(&mut self, pid: i32) -> bool {
        if pid <= 0 {
            return false;
        }
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return false };
        let maps = self.parse(pid, &text);
        if self.procs.insert(pid, Proc { maps, read: Instant::now() }).is_none() {
            self.order.push_back(pid);
            while self.order.len() > MAX_PROCS {
                if let Some(old) = self.order.pop_front() {
                    self.procs.remove(&old);
                }
            }
        }
        true
    }

    /// The executable file mappings of `text` (`pid`'s maps), sorted, each
    /// file met for the first time opened.
    fn parse(&mut self, pid: i32, text: &str) -> Vec<Mapping> {
        let mut maps: Vec<Mapping> = text
            .lines()
            .filter_map(parse_line)
            .map(|(start, end, offset, dev, inode, path)| {
                let file = match self.by_inode.get(&(dev.to_string(), inode)) {
                    Some(&i) => i,
                    None => {
                        let open = if self.held < MAX_OPEN && fd_room() { hold(pid, start, end, path) } else { None };
                        self.held += usize::from(open.is_some());
                        let name = Path::new(path)
                            .file_name()
                            .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned());
                        self.files.push(MappedFile { path: PathBuf::from(path), name, open, build: None });
                        self.by_inode.insert((dev.to_string(), inode), self.files.len() - 1);
                        self.files.len() - 1
                    }
                };
                Mapping { start, end, offset, file }
            })
            .collect();
        maps.sort_unstable_by_key(|m| m.start);
        maps
    }

    /// Whether the mappings of `pid` are known.
    pub fn known(&self, pid: i32) -> bool {
        self.procs.contains_key(&pid)
    }

    /// The file that holds `addr` of `pid`, and the address's offset in it.
    pub fn locate(&self, pid: i32, addr: u64) -> Option<(usize, u64)> {
        let maps = &self.procs.get(&pid)?.maps;
        let i = maps.partition_point(|m| m.start <= addr).checked_sub(1)?;
        let m = maps[i];
        (addr < m.end).then(|| (m.file, addr - m.start + m.offset))
    }

    pub fn file(&self, i: usize) -> &MappedFile {
        &self.files[i]
    }

    /// The build ID of file `i`, read once.
    pub fn build_id(&mut self, i: usize) -> Option<&[u8]> {
        let f = &mut self.files[i];
        if f.build.is_none() {
            let path = f.read_path();
            f.build = Some(blazesym::helper::read_elf_build_id(&path).ok().flatten().map(|b| b.to_vec()));
        }
        f.build.as_ref().and_then(|b| b.as_deref()).filter(|b| !b.is_empty())
    }
}

/// Whether this process has under half of its open-files limit open: the
/// files held never starve the trace buffers and the store of descriptors.
fn fd_room() -> bool {
    let limit = std::fs::read_to_string("/proc/self/limits").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3)?.parse::<usize>().ok())
    });
    let open = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).ok();
    matches!((limit, open), (Some(l), Some(o)) if o < l / 2)
}

/// Opens the file that `pid` maps at `[start, end)`: through the mapping
/// itself (it works in another mount namespace and for a deleted file),
/// else by its path.
fn hold(pid: i32, start: u64, end: u64, path: &str) -> Option<(File, u64, u64)> {
    let f = File::open(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
        .or_else(|_| File::open(format!("/proc/{pid}/root{path}")))
        .ok()?;
    let m = f.metadata().ok()?;
    Some((f, m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_executable_file_mappings_only() {
        let text = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fe:00 247030                     /usr/bin/cat
55d0c0a02000-55d0c0a07000 r-xp 00002000 fe:00 247030                     /usr/bin/cat
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7f1000000000-7f1000100000 r-xp 00028000 fe:00 1234                       /usr/lib/libx.so (deleted)
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
7f2000000000-7f2000001000 r-xp 00000000 00:05 77                         /memfd:jit (deleted)";
        let lines: Vec<_> = text.lines().filter_map(parse_line).collect();
        assert_eq!(
            lines,
            vec![
                (0x55d0c0a02000, 0x55d0c0a07000, 0x2000, "fe:00", 247030, "/usr/bin/cat"),
                (0x7f1000000000, 0x7f1000100000, 0x28000, "fe:00", 1234, "/usr/lib/libx.so"),
                (0x7f2000000000, 0x7f2000001000, 0, "00:05", 77, "/memfd:jit"),
            ]
        );
        let mut m = ProcMaps::default();
        let maps = m.parse(-1, text);
        m.procs.insert(7, Proc { maps, read: Instant::now() });
        assert_eq!(m.locate(7, 0x55d0c0a02010), Some((0, 0x2010)));
        assert_eq!(m.locate(7, 0x7f1000000100), Some((1, 0x28100)));
        assert_eq!(m.file(1).name, "libx.so");
        assert_eq!(m.locate(7, 0x55d0c0a07000), None, "the end is outside");
        assert_eq!(m.locate(7, 0x7ffd00000010), None, "the vDSO is no file");
        assert_eq!(m.locate(7, 0x1000), None);
        assert_eq!(m.locate(8, 0x55d0c0a02010), None, "an unknown process");
    }

    /// This process's own code: found in its executable, held open, read
    /// by its own path while that is the same file.
    #[test]
    fn finds_this_process_code_in_its_executable() {
        let mut m = ProcMaps::default();
        let pid = std::process::id() as i32;
        assert!(m.seen(pid));
        let f = keeps_executable_file_mappings_only as *const () as u64;
        let (i, off) = m.locate(pid, f).expect("this test's code is mapped");
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(m.file(i).name, exe.file_name().unwrap().to_string_lossy());
        assert!(m.file(i).open.is_some(), "held open");
        assert_eq!(m.file(i).read_path(), exe);
        assert!(off > 0);
        assert!(!m.seen(-5), "no such process");
    }
}
