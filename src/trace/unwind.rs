//! User stacks unwound with the programs' own unwind tables, as `perf
//! --call-graph dwarf` and samply do: each profiler sample carries the
//! interrupted task's user registers and a copy of the top of its user
//! stack ([`crate::sys::perf::UserStack`]); here, in the symbols thread (off
//! the measured CPUs, after the sample), `framehop` walks it with the
//! DWARF call frame information (`.eh_frame`, indexed by `.eh_frame_hdr`,
//! else `.debug_frame`) of the files the process maps, the vDSO's included.
//! Code that keeps frame pointers needs no tables; code built without them
//! (most distributions' C libraries, the vDSO, C, C++ and Rust release
//! builds) does: a frame-pointer walk through it skips the caller, often
//! the one frame that matters.
//!
//! Where no file of a step has tables (a JIT's code, a stripped file
//! without `.eh_frame`), `framehop` takes that step by the frame pointer;
//! where the stack copy ends before the stack does, the kernel's own
//! frame-pointer walk of the same sample goes on from the last frame both
//! found. Each stack says which gave it ([`DWARF`], [`DWARF_FP`], [`FP`]).
//!
//! The vDSO is the same image in every 64-bit process of a kernel: rtscope
//! reads its own (its `[vdso]` mapping, through `/proc/self/mem`) and puts
//! it where each process maps its own.
//!
//! Registers are only taken on x86-64 (ip, sp, bp); elsewhere the samples
//! carry none and user stacks are the kernel's frame-pointer walk.

use super::procmaps::ProcMaps;
use crate::sys::perf::{UserStack, u16_at, u32_at, u64_at};
use std::collections::HashMap;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Every step by the files' unwind tables.
pub const DWARF: &str = "dwarf";
/// Some steps by frame pointers: through code whose file has no tables, or
/// past the end of the stack copy (the kernel's frame-pointer walk).
pub const DWARF_FP: &str = "dwarf+fp";
/// The kernel's frame-pointer walk alone.
pub const FP: &str = "fp";

/// Frames kept per stack.
const MAX_FRAMES: usize = 64;
/// The end of user space (x86-64 with 4 or 5 page-table levels, arm64 with
/// up to 52-bit addresses).
const USER_END: u64 = 0x0100_0000_0000_0000;
/// Processes whose unwinders are kept; past it they are all built again.
const MAX_PROCS: usize = 1024;
/// The files' tables kept, in bytes; past it they are all read again when
/// needed (a machine running many different programs).
const MAX_TABLES: usize = 64 << 20;
/// The largest unwind section read (a browser's `.eh_frame` is some 10 MB).
const MAX_SECTION: u64 = 256 << 20;

const PT_LOAD: u32 = 1;
const PF_X: u32 = 1;
const SHT_NOBITS: u32 = 8;
const SHF_COMPRESSED: u64 = 0x800;

/// Where an ELF file's bytes come from: the file, or a copy in memory.
trait ReadAt {
    fn bytes(&self, off: u64, len: u64) -> Option<Vec<u8>>;
}

impl ReadAt for std::fs::File {
    fn bytes(&self, off: u64, len: u64) -> Option<Vec<u8>> {
        let mut b = vec![0; usize::try_from(len).ok()?];
        self.read_exact_at(&mut b, off).ok()?;
        Some(b)
    }
}

impl ReadAt for [u8] {
    fn bytes(&self, off: u64, len: u64) -> Option<Vec<u8>> {
        let (a, n) = (usize::try_from(off).ok()?, usize::try_from(len).ok()?);
        self.get(a..a.checked_add(n)?).map(<[u8]>::to_vec)
    }
}

/// One loadable segment of an ELF file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Load {
    offset: u64,
    vaddr: u64,
    filesz: u64,
    exec: bool,
}

/// A section's addresses (as the file states them) and its bytes.
type Section = (Range<u64>, Arc<[u8]>);

/// What an ELF file holds for unwinding: its loadable segments (to place
/// it where a process maps it) and its call frame information.
#[derive(Default)]
pub struct Cfi {
    loads: Vec<Load>,
    eh_frame: Option<Section>,
    eh_frame_hdr: Option<Section>,
    debug_frame: Option<Arc<[u8]>>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
}

impl Cfi {
    /// The bytes of its tables.
    fn size(&self) -> usize {
        let len = |s: &Option<Section>| s.as_ref().map_or(0, |x| x.1.len());
        len(&self.eh_frame) + len(&self.eh_frame_hdr) + self.debug_frame.as_ref().map_or(0, |d| d.len())
    }

    /// The tables of a little-endian ELF64 file; an error says why there
    /// are none.
    fn read(src: &(impl ReadAt + ?Sized)) -> Result<Cfi, String> {
        let h = src.bytes(0, 64).ok_or("too short for an ELF header")?;
        if h[..4] != *b"\x7fELF" || h[4] != 2 || h[5] != 1 {
            return Err("not a little-endian 64-bit ELF file".into());
        }
        let field = |v: Option<u64>| v.ok_or_else(|| "a bad ELF header".to_string());
        let (phoff, shoff) = (field(u64_at(&h, 32))?, field(u64_at(&h, 40))?);
        let (phentsize, phnum) = (field(u16_at(&h, 54).map(u64::from))?, field(u16_at(&h, 56).map(u64::from))?);
        let (shentsize, shnum) = (field(u16_at(&h, 58).map(u64::from))?, field(u16_at(&h, 60).map(u64::from))?);
        let shstrndx = field(u16_at(&h, 62).map(u64::from))?;
        let mut cfi = Cfi::default();
        if phentsize >= 56 {
            let ph = src.bytes(phoff, phentsize * phnum).ok_or("its program headers cannot be read")?;
            for i in 0..phnum as usize {
                let p = &ph[i * phentsize as usize..];
                if u32_at(p, 0) == Some(PT_LOAD) {
                    cfi.loads.push(Load {
                        offset: u64_at(p, 8).unwrap_or(0),
                        vaddr: u64_at(p, 16).unwrap_or(0),
                        filesz: u64_at(p, 32).unwrap_or(0),
                        exec: u32_at(p, 4).is_some_and(|f| f & PF_X != 0),
                    });
                }
            }
        }
        if shentsize < 64 || shnum == 0 || shstrndx >= shnum {
            return Err("it has no section headers".into());
        }
        let sh = src.bytes(shoff, shentsize * shnum).ok_or("its section headers cannot be read")?;
        let header = |i: u64| &sh[(i * shentsize) as usize..];
        let strtab = header(shstrndx);
        let names = src
            .bytes(u64_at(strtab, 24).unwrap_or(0), u64_at(strtab, 32).unwrap_or(0).min(1 << 20))
            .ok_or("its section names cannot be read")?;
        for i in 0..shnum {
            let s = header(i);
            let name_at = u32_at(s, 0).unwrap_or(u32::MAX) as usize;
            let name = names.get(name_at..).map_or(&b""[..], |n| &n[..n.iter().position(|&c| c == 0).unwrap_or(0)]);
            let (kind, flags) = (u32_at(s, 4).unwrap_or(0), u64_at(s, 8).unwrap_or(0));
            let (addr, off, size) =
                (u64_at(s, 16).unwrap_or(0), u64_at(s, 24).unwrap_or(0), u64_at(s, 32).unwrap_or(0));
            let range = addr..addr.saturating_add(size);
            let data = || -> Option<Arc<[u8]>> {
                (kind != SHT_NOBITS && flags & SHF_COMPRESSED == 0 && size <= MAX_SECTION)
                    .then(|| src.bytes(off, size))
                    .flatten()
                    .map(Arc::from)
            };
            match name {
                b".eh_frame" => cfi.eh_frame = data().map(|d| (range, d)),
                b".eh_frame_hdr" => cfi.eh_frame_hdr = data().map(|d| (range, d)),
                b".debug_frame" => cfi.debug_frame = data(),
                b".text" => cfi.text = Some(range),
                b".got" => cfi.got = Some(range),
                _ => {}
            }
        }
        if cfi.eh_frame.is_none() && cfi.debug_frame.is_none() {
            return Err("it has no unwind tables (.eh_frame, .debug_frame)".into());
        }
        Ok(cfi)
    }

    /// The address at which a mapping of this file at `start`, from file
    /// offset `offset`, `len` bytes, puts the file's address 0 (its load
    /// bias): by the loadable segment the mapping shows, the executable one
    /// where it shows two.
    fn bias(&self, start: u64, offset: u64, len: u64) -> Option<u64> {
        let l = self
            .loads
            .iter()
            .filter(|l| l.offset < offset.saturating_add(len) && offset < l.offset.saturating_add(l.filesz.max(1)))
            .max_by_key(|l| l.exec)?;
        // The mapping's address of file offset `l.offset` holds `l.vaddr`.
        Some(start.wrapping_add(l.offset).wrapping_sub(offset).wrapping_sub(l.vaddr))
    }
}

/// How the unwinds went: the stacks each unwinder gave, and what they
/// took.
#[derive(Default)]
pub struct UnwindStats {
    pub by: std::collections::BTreeMap<&'static str, u64>,
    /// CPU time per stack, ns (with the first of a process, reading its
    /// files' tables).
    pub time: rtscope_model::hist::Tally,
    /// Bytes of user stack the samples unwound carried, in all.
    pub bytes: u64,
}

#[cfg(target_arch = "x86_64")]
mod arch {
    pub use framehop::x86_64::{CacheX86_64 as Cache, UnwindRegsX86_64 as Regs, UnwinderX86_64 as Unwinder};
}

/// One process's unwinder: its modules placed where it maps them.
#[cfg(target_arch = "x86_64")]
struct ProcUnwinder {
    stamp: u64,
    unwinder: arch::Unwinder<Arc<[u8]>>,
    /// The ranges of its code that have tables.
    tables: Vec<Range<u64>>,
}

/// The unwinder of the symbols thread.
#[derive(Default)]
pub struct Unwind {
    /// By file (its index in the maps' files): its tables, or why none;
    /// and their bytes in all.
    files: HashMap<usize, Result<Arc<Cfi>, String>>,
    files_bytes: usize,
    /// The vDSO's tables, read at the first process that maps one.
    vdso: Option<Option<Arc<Cfi>>>,
    #[cfg(target_arch = "x86_64")]
    procs: HashMap<i32, ProcUnwinder>,
    #[cfg(target_arch = "x86_64")]
    cache: Option<Box<arch::Cache>>,
    pub stats: UnwindStats,
}

/// Whether `a` can be a user code address (a frame-pointer walk through
/// code built without frame pointers reads data: its first address that
/// is none ends it).
pub fn user(a: u64) -> bool {
    (4096..USER_END).contains(&a)
}

/// `dwarf` (a walk with the tables, innermost first), `complete` when it
/// reached the stack's root, continued by `fp` (the kernel's frame-pointer
/// walk of the same stack) from the last frame both hold, where the walk
/// stopped short and `fp` goes further. Returns the frames and whether
/// `fp` added any.
pub fn splice(dwarf: &[u64], complete: bool, fp: &[u64]) -> (Vec<u64>, bool) {
    let mut out = dwarf.to_vec();
    if complete || dwarf.is_empty() {
        return (out, false);
    }
    // Innermost first: the deepest frame of the walk that the kernel's walk
    // also reached.
    let Some((i, j)) = dwarf
        .iter()
        .enumerate()
        .rev()
        .filter(|(i, _)| *i > 0)
        .find_map(|(i, a)| Some((i, fp.iter().position(|b| b == a)?)))
    else {
        return (out, false);
    };
    out.truncate(i + 1);
    let more: Vec<u64> = fp[j + 1..].iter().copied().take_while(|&a| user(a)).collect();
    let added = !more.is_empty();
    out.extend(more);
    out.truncate(MAX_FRAMES);
    (out, added)
}

impl Unwind {
    /// The user frames of a sample of process `pid`, innermost first (the
    /// first exact, the rest return addresses), and which unwinder gave
    /// them: with the tables of the files `maps` says it maps, where the
    /// sample carries `stack`; else `fp`, the kernel's frame-pointer walk.
    pub fn user(
        &mut self,
        maps: &mut ProcMaps,
        pid: i32,
        stack: Option<&UserStack>,
        fp: &[u64],
    ) -> (Vec<u64>, &'static str) {
        let fp_only = || (fp.iter().copied().take_while(|&a| user(a)).collect::<Vec<u64>>(), FP);
        let Some(st) = stack else { return fp_only() };
        // The symbols thread's CPU time: on a busy machine its wall time
        // holds the other threads' turns.
        let t0 = crate::sys::clock::thread_cpu_ns();
        let got = self.walk(maps, pid, st);
        self.stats.time.record(crate::sys::clock::thread_cpu_ns().saturating_sub(t0));
        self.stats.bytes += st.bytes.len() as u64;
        let out = match got {
            // No step took the tables (no file of the stack had any), or
            // none could be taken (the copy was too short): the kernel's
            // walk, from the same frame pointers.
            Some((frames, complete, tabled)) if tabled > 0 && (complete || frames.len() > 1) => {
                let (all, more) = splice(&frames, complete, fp);
                (all, if more || tabled < frames.len() { DWARF_FP } else { DWARF })
            }
            _ => fp_only(),
        };
        *self.stats.by.entry(out.1).or_default() += 1;
        out
    }

    /// The tables of file `i`, read once.
    /// The tables of file `i`, read once (again after [`MAX_TABLES`]
    /// made them all go).
    fn file(&mut self, maps: &ProcMaps, i: usize) -> Option<Arc<Cfi>> {
        if let Some(got) = self.files.get(&i) {
            return got.as_ref().ok().cloned();
        }
        let got = maps
            .file(i)
            .read_path()
            .ok_or_else(|| "it was replaced or deleted".to_string())
            .and_then(|path| std::fs::File::open(&path).map_err(|e| e.to_string()))
            .and_then(|f| Cfi::read(&f).map(Arc::new));
        let size = got.as_ref().map_or(0, |c| c.size());
        if self.files_bytes + size > MAX_TABLES {
            // The processes' unwinders hold the tables too.
            self.files.clear();
            #[cfg(target_arch = "x86_64")]
            self.procs.clear();
            self.files_bytes = 0;
        }
        self.files_bytes += size;
        self.files.insert(i, got);
        self.files.get(&i)?.as_ref().ok().cloned()
    }

    fn vdso(&mut self) -> Option<Arc<Cfi>> {
        self.vdso
            .get_or_insert_with(|| {
                super::vdso::own_image().and_then(|img| Cfi::read(img.as_slice()).ok()).map(Arc::new)
            })
            .clone()
    }

    /// Why file `i`'s frames were walked without tables, if they were.
    pub fn why_not(&self, i: usize) -> Option<&str> {
        self.files.get(&i).and_then(|r| r.as_ref().err()).map(String::as_str)
    }

    /// The walk of `st` with `pid`'s tables: frames, whether it reached the
    /// root, and how many steps took tables. None where this architecture
    /// has no unwinder.
    #[cfg(target_arch = "x86_64")]
    fn walk(&mut self, maps: &mut ProcMaps, pid: i32, st: &UserStack) -> Option<(Vec<u64>, bool, usize)> {
        use framehop::Unwinder as _;
        maps.seen(pid);
        let (stamp, _) = maps.mappings(pid)?;
        if self.procs.get(&pid).is_none_or(|p| p.stamp != stamp) {
            if self.procs.len() >= MAX_PROCS {
                self.procs.clear();
            }
            let p = self.build(maps, pid)?;
            self.procs.insert(pid, p);
        }
        let p = self.procs.get(&pid)?;
        let cache = self.cache.get_or_insert_with(|| Box::new(arch::Cache::new()));
        let bytes = &st.bytes;
        let mut read = |addr: u64| -> Result<u64, ()> {
            let at = usize::try_from(addr.checked_sub(st.sp).ok_or(())?).map_err(|_| ())?;
            u64_at(bytes, at).ok_or(())
        };
        let mut it = p.unwinder.iter_frames(st.ip, arch::Regs::new(st.ip, st.sp, st.bp), cache, &mut read);
        let (mut frames, mut tabled, mut complete) = (Vec::new(), 0, false);
        loop {
            match it.next() {
                Ok(Some(f)) => {
                    let a = f.address();
                    if !user(a) || frames.len() >= MAX_FRAMES {
                        break;
                    }
                    // The step from this frame to the next takes its rule.
                    let look = f.address_for_lookup();
                    tabled += usize::from(p.tables.iter().any(|r| r.contains(&look)));
                    frames.push(a);
                }
                Ok(None) => {
                    complete = true;
                    break;
                }
                Err(_) => break,
            }
        }
        Some((frames, complete, tabled))
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn walk(&mut self, _: &mut ProcMaps, _: i32, _: &UserStack) -> Option<(Vec<u64>, bool, usize)> {
        None
    }

    /// `pid`'s unwinder: a module for each code mapping whose file (or the
    /// vDSO) has tables.
    #[cfg(target_arch = "x86_64")]
    fn build(&mut self, maps: &ProcMaps, pid: i32) -> Option<ProcUnwinder> {
        use framehop::Unwinder as _;
        let (stamp, mappings) = maps.mappings(pid)?;
        let mappings = mappings.to_vec();
        let mut unwinder = arch::Unwinder::new();
        let mut tables = Vec::new();
        for m in mappings {
            let (cfi, name) = match (m.file, m.vdso) {
                (Some(f), _) => (self.file(maps, f), maps.file(f).name.clone()),
                (None, true) => (self.vdso(), "[vdso]".to_string()),
                _ => continue,
            };
            let Some(cfi) = cfi else { continue };
            let Some(bias) = cfi.bias(m.start, m.offset, m.end - m.start) else { continue };
            let info = framehop::ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: cfi.text.clone(),
                got_svma: cfi.got.clone(),
                eh_frame_svma: cfi.eh_frame.as_ref().map(|e| e.0.clone()),
                eh_frame: cfi.eh_frame.as_ref().map(|e| e.1.clone()),
                eh_frame_hdr_svma: cfi.eh_frame_hdr.as_ref().map(|e| e.0.clone()),
                eh_frame_hdr: cfi.eh_frame_hdr.as_ref().map(|e| e.1.clone()),
                debug_frame: cfi.debug_frame.clone(),
                ..Default::default()
            };
            unwinder.add_module(framehop::Module::new(name, m.start..m.end, bias, info));
            tables.push(m.start..m.end);
        }
        Some(ProcUnwinder { stamp, unwinder, tables })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's walk goes on where the tables' walk stopped short,
    /// from the deepest frame both hold; not past a complete walk.
    #[test]
    fn the_frame_pointer_walk_continues_a_walk_cut_short() {
        let fp = [0x1000, 0x5000, 0x6000, 0x7000];
        assert_eq!(splice(&[0x1000, 0x2000, 0x5000], false, &fp), (vec![0x1000, 0x2000, 0x5000, 0x6000, 0x7000], true));
        assert_eq!(splice(&[0x1000, 0x2000, 0x5000], true, &fp), (vec![0x1000, 0x2000, 0x5000], false));
        // Nothing in common past the first frame (the exact IP, which the
        // kernel's walk always starts with): nothing added.
        assert_eq!(splice(&[0x1000, 0x2000], false, &fp), (vec![0x1000, 0x2000], false));
        assert_eq!(splice(&[0x1000, 0x7000], false, &fp), (vec![0x1000, 0x7000], false), "nothing beyond");
        // The kernel's walk ends at the first address no user code can hold.
        assert_eq!(splice(&[0x1000, 0x5000], false, &[0x1000, 0x5000, 0x6000, 3, 0x7000]).0, [0x1000, 0x5000, 0x6000]);
    }

    /// rtscope's own file and the C library have tables; the mapping of
    /// rtscope's code puts its file's addresses where they run.
    #[test]
    fn reads_the_tables_of_mapped_files_and_the_vdso() {
        let exe = std::fs::File::open("/proc/self/exe").unwrap();
        let cfi = Cfi::read(&exe).unwrap();
        assert!(cfi.eh_frame.is_some(), "rtscope has .eh_frame");
        assert!(cfi.loads.iter().any(|l| l.exec));
        // This function's own address, through the mapping that holds it.
        let here = reads_the_tables_of_mapped_files_and_the_vdso as fn() as usize as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        let line = maps
            .lines()
            .filter(|l| l.ends_with(me.to_str().unwrap()))
            .find(|l| {
                let (a, b) = l.split_whitespace().next().unwrap().split_once('-').unwrap();
                (u64::from_str_radix(a, 16).unwrap()..u64::from_str_radix(b, 16).unwrap()).contains(&here)
            })
            .expect("the mapping of this code");
        let f: Vec<&str> = line.split_whitespace().collect();
        let (a, b) = f[0].split_once('-').unwrap();
        let (start, end) = (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap());
        let offset = u64::from_str_radix(f[2], 16).unwrap();
        let bias = cfi.bias(start, offset, end - start).unwrap();
        // The file's .text holds this function at its address less the bias.
        let text = cfi.text.clone().unwrap();
        assert!(text.contains(&(here - bias)), "{:#x} - {bias:#x} in .text {text:x?}", here);
        match crate::trace::vdso::own_image() {
            Some(img) => {
                let v = Cfi::read(img.as_slice()).unwrap();
                assert!(v.eh_frame.is_some() && v.eh_frame_hdr.is_some(), "the vDSO has its tables");
            }
            None => eprintln!("skipped: no vDSO here"),
        }
        assert!(Cfi::read(&b"\x7fELF\x01\x01"[..]).is_err());
        assert!(Cfi::read(&b"not an elf file at all, not even close to one, no sir, not one bit"[..]).is_err());
    }
}
