//! Naming addresses: kernel ones through `/proc/kallsyms` (modules
//! included; a `vmlinux` with DWARF where blazesym finds one), user ones
//! through the ELF symbols and DWARF of the files a process has mapped
//! (blazesym; the mappings read when the reader first saw the process, see
//! [`super::procmaps`], so that one that has exited since is named too).
//! Each file is parsed once per
//! run and each address named once. A thread of its own ("rtscope-symbols")
//! names the kept episodes' stacks and samples between the trace reader
//! and the writer, so that parsing a large binary's DWARF never holds up
//! the reader; it also ranks the functions over-represented inside
//! episodes at the end.

use super::procmaps::{Located, ProcMaps, file_name};
use super::remainder::{Gap, remainder};
use super::stacks::WakeStack;
use super::symcache::{Kept, SymCache};
use super::unwind::{self, Unwind};
use super::vdso::{self, VdsoFile};
use crate::recorder::EpisodeMsg;
use crate::sys::perf::PerfSample;
use blazesym::Pid;
use blazesym::symbolize::source::{Elf, Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use rtscope_model::episode::{CodeStack, Episode, Folded, Frame, OverRow, SampleRow, WindowSamples};
use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender};

/// The raw code evidence of one episode, named by the symbols thread.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawCode {
    /// The stacks at the probe's wake-up, and the running task's name.
    pub stack: Option<(WakeStack, String)>,
    /// The main cause thread's first profiler sample in the window, and
    /// its name (when the stack above is another task's).
    pub blocker: Option<(PerfSample, String)>,
    /// The profiler's samples inside the episode's window.
    pub samples: Vec<PerfSample>,
    /// The sampling period (0: no profiler).
    pub period_ns: u64,
    /// The unaccounted time and what the trace says about it.
    pub gap: Option<Gap>,
}

/// Leaf addresses of the run's samples: (pid, 0 for the kernel's; addr)
/// -> (inside episodes, outside).
#[derive(Default)]
pub struct Counts {
    pub by_addr: HashMap<(i32, u64), [u64; 2]>,
}

impl Counts {
    pub fn add(&mut self, s: &PerfSample, inside: bool) {
        let key = match (s.kernel.first(), s.user.first()) {
            (Some(&k), _) => (0, k),
            (None, Some(&u)) => (s.pid, u),
            _ => return,
        };
        self.by_addr.entry(key).or_insert([0; 2])[usize::from(!inside)] += 1;
    }

    pub fn merge(&mut self, other: Counts) {
        for (k, v) in other.by_addr {
            let e = self.by_addr.entry(k).or_insert([0; 2]);
            e[0] += v[0];
            e[1] += v[1];
        }
    }
}

/// Messages to the symbols thread, in the reader's order.
pub enum SymMsg {
    /// An episode to keep, with its raw stacks and samples.
    Keep(Box<Episode>, Box<RawCode>),
    /// Anything else for the writer (a drop), kept in order.
    Pass(EpisodeMsg),
    /// The run's sample counts, at the end.
    Finish(Counts),
    /// Processes whose user code wake-up stacks showed, each with its first
    /// user address: their mappings are read now, while they live, unless
    /// known and holding that address.
    Seen(Vec<(i32, u64)>),
    /// Forks, execs and executable mappings as the kernel told them, in order,
    /// before the wake-ups that may show them.
    Mapped(Vec<crate::sys::perf::MapEvent>),
}

/// Where the reader sends its episodes: through the symbols thread when
/// the run has stacks or samples to name, else straight to the writer, so
/// that a plain `--trace` run wakes no thread more than it did before them.
pub enum Sink {
    Symbols(Sender<SymMsg>),
    Writer(Sender<EpisodeMsg>),
}

impl Sink {
    pub fn send(&self, msg: SymMsg) {
        match self {
            Sink::Symbols(tx) => {
                let _ = tx.send(msg);
            }
            Sink::Writer(tx) => match msg {
                // Nothing to name: only the remainder, from its gap.
                SymMsg::Keep(mut e, raw) => {
                    if let Some(g) = &raw.gap {
                        e.remainder = Some(remainder(g, None, false));
                    }
                    let _ = tx.send(EpisodeMsg::Keep(e));
                }
                SymMsg::Pass(m) => {
                    let _ = tx.send(m);
                }
                SymMsg::Finish(_) | SymMsg::Seen(_) | SymMsg::Mapped(_) => {}
            },
        }
    }
}

/// What the symbols thread found.
#[derive(Default)]
pub struct SymReport {
    pub over: Vec<OverRow>,
    pub notes: Vec<String>,
    /// How the profiler's user stacks were unwound ([`Symbols::unwound`]).
    pub unwound: Option<String>,
}

/// A named address.
#[derive(Clone, Debug, Default)]
struct Name {
    function: Option<String>,
    offset: Option<u64>,
    module: Option<String>,
    file: Option<String>,
    line: Option<u32>,
    /// Unnamed in a mapped file: its offset there.
    file_offset: Option<u64>,
}

pub struct Symbols {
    sym: Symbolizer,
    /// The mappings of the processes met, read when first seen (again
    /// after an `exec`).
    maps: ProcMaps,
    /// Names of user code kept across runs, per build.
    disk: Option<SymCache>,
    /// (pid, 0 for the kernel's; address) -> its name.
    cache: HashMap<(i32, u64), Name>,
    pub notes: Vec<String>,
    kallsyms: Kallsyms,
    /// Processes whose frames could not be named (exited, unreadable).
    gone: std::collections::BTreeSet<i32>,
    /// Why a mapped file's frames are not named (stripped, unreadable), by
    /// the file (its index in the maps' files: two files of one name are
    /// two): an episode's stack says it of its own frames.
    why: HashMap<usize, String>,
    /// rtscope's own executable: its build ID, and its device and inode.
    /// Its frames (its helper threads', the disturber's) are named from
    /// its symbol table alone, where it has one: its DWARF, parsed, took
    /// some 75 MB of a traced run's memory for the file and line of
    /// rtscope's own code.
    own: (Option<Vec<u8>>, Option<(u64, u64)>),
    /// The profiler's user stacks, unwound with the files' own tables.
    unwind: Unwind,
    /// The vDSO's image, to name its frames by.
    vdso: VdsoFile,
}

impl Default for Symbols {
    fn default() -> Self {
        Self::new()
    }
}

/// What `/proc/kallsyms` says beyond the names blazesym reads from it:
/// whether `kptr_restrict` hides the addresses, and which module each
/// module symbol is in (blazesym names a module's functions, not the
/// module).
#[derive(Default)]
struct Kallsyms {
    /// Why kernel addresses cannot be named, if they cannot.
    hidden: Option<String>,
    /// Module symbols' start addresses and their modules (indices into
    /// `names`), sorted.
    modules: Vec<(u64, usize)>,
    names: Vec<String>,
    /// The first function's address (0: none).
    first_text: u64,
}

impl Kallsyms {
    fn read() -> Kallsyms {
        let restrict = std::fs::read_to_string("/proc/sys/kernel/kptr_restrict").unwrap_or_default();
        match std::fs::read_to_string("/proc/kallsyms") {
            Ok(text) => Kallsyms::parse(&text, restrict.trim()),
            Err(_) => Kallsyms {
                hidden: Some(
                    "kernel frames are not named: /proc/kallsyms cannot be read (CONFIG_KALLSYMS); the addresses \
                     are stored"
                        .into(),
                ),
                ..Default::default()
            },
        }
    }

    /// `text`: `/proc/kallsyms`, lines `ADDRESS TYPE NAME [MODULE]`. The
    /// addresses are hidden when a text symbol's reads as zero (per-CPU
    /// symbols are at zero on some kernels, so the first line says
    /// nothing).
    fn parse(text: &str, restrict: &str) -> Kallsyms {
        let mut k = Kallsyms::default();
        let mut text_seen = false;
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let (Some(addr), Some(kind), Some(_name)) = (f.next(), f.next(), f.next()) else { continue };
            let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
            if !text_seen && matches!(kind, "T" | "t") {
                text_seen = true;
                k.first_text = addr;
                if addr == 0 {
                    k.hidden = Some(format!(
                        "kernel frames are not named: /proc/kallsyms shows zero addresses (kernel.kptr_restrict = \
                         {restrict}); run as root with `sysctl kernel.kptr_restrict=1` (or 0)"
                    ));
                    return k;
                }
            }
            // The kernel's own trampolines are listed as `[__builtin__ftrace]`.
            if let Some(m) = f.next().filter(|m| m.starts_with('[') && !m.starts_with("[__builtin")) {
                let m = m.trim_matches(['[', ']']);
                // A module's symbols are listed together.
                if k.names.last().is_none_or(|last| last != m) {
                    k.names.push(m.to_string());
                }
                k.modules.push((addr, k.names.len() - 1));
            }
        }
        if !text_seen {
            k.hidden = Some("kernel frames are not named: /proc/kallsyms lists no function (CONFIG_KALLSYMS)".into());
        }
        k.modules.sort_unstable();
        k
    }

    /// The module of the kernel symbol that starts at `start`: None for
    /// the kernel's own. Read once per run: the names of a module loaded
    /// during the run are not known to the symbolizer either.
    fn module_of(&self, start: u64) -> Option<&str> {
        let i = self.modules.binary_search_by_key(&start, |(a, _)| *a).ok()?;
        Some(&self.names[self.modules[i].1])
    }
}

/// Kernel addresses through `/proc/kallsyms` (or a `vmlinux`).
fn kernel_syms<'s>(sym: &'s Symbolizer, todo: &[u64]) -> Result<Vec<Symbolized<'s>>, Option<String>> {
    let src = Source::Kernel(Kernel::default());
    sym.symbolize(&src, Input::AbsAddr(todo)).map_err(|e| Some(e.to_string()))
}

/// User addresses of `pid` through the files it has mapped now (the live
/// process: for what no mapped file holds, such as the vDSO).
fn user_syms<'s>(sym: &'s Symbolizer, pid: i32, todo: &[u64]) -> Result<Vec<Symbolized<'s>>, Option<String>> {
    let src = |debug_syms: bool| {
        let mut p = Process::new(Pid::from(pid as u32));
        p.debug_syms = debug_syms;
        Source::Process(p)
    };
    syms_or_each(sym, &src, false, todo)
}

/// File offsets of the ELF file at `path`; `dwarf`: its debug data too
/// (file and line), else its symbol tables alone.
fn file_syms<'s>(
    sym: &'s Symbolizer,
    path: &Path,
    offsets: &[u64],
    dwarf: bool,
) -> Result<Vec<Symbolized<'s>>, Option<String>> {
    let src = |debug_syms: bool| {
        let mut e = Elf::new(path);
        e.debug_syms = debug_syms && dwarf;
        Source::Elf(e)
    };
    syms_or_each(sym, &src, true, offsets)
}

/// `todo` (file offsets or absolute addresses) named from the source
/// `src(debug_syms)` makes. One unreadable file (a debug file blazesym
/// cannot parse) fails the batch: then each address alone, then without
/// DWARF; an error where none is named.
fn syms_or_each<'s>(
    sym: &'s Symbolizer,
    src: &dyn Fn(bool) -> Source<'static>,
    file_offsets: bool,
    todo: &[u64],
) -> Result<Vec<Symbolized<'s>>, Option<String>> {
    let input = |a| if file_offsets { Input::FileOffset(a) } else { Input::AbsAddr(a) };
    let batch = if file_offsets { Input::FileOffset(todo) } else { Input::AbsAddr(todo) };
    match sym.symbolize(&src(true), batch) {
        Ok(s) => Ok(s),
        Err(e) => {
            let each: Vec<Symbolized> = todo
                .iter()
                .map(|&a| {
                    sym.symbolize_single(&src(true), input(a))
                        .or_else(|_| sym.symbolize_single(&src(false), input(a)))
                        .unwrap_or(Symbolized::Unknown(blazesym::symbolize::Reason::IgnoredError))
                })
                .collect();
            if each.iter().all(|x| matches!(x, Symbolized::Unknown(_))) { Err(Some(e.to_string())) } else { Ok(each) }
        }
    }
}

/// Why blazesym names no function in a user file that has no symbol for
/// an address.
const STRIPPED: &str = "it is stripped: install its debug symbols (on Debian its -dbgsym package), or keep its \
                        symbol table";

/// blazesym found the file but no symbol for the address (a stripped
/// file's).
fn no_symbol(s: &Symbolized) -> bool {
    matches!(s, Symbolized::Unknown(blazesym::symbolize::Reason::MissingSyms))
}

/// blazesym's answer for one address as a [`Name`]: a kernel frame's
/// module is "kernel" or its module's name (from a module's own file, or
/// from `kallsyms`).
fn to_name(s: Symbolized, kernel: Option<&Kallsyms>) -> Name {
    match s {
        Symbolized::Sym(s) => Name {
            function: Some(s.name.to_string()),
            offset: Some(s.offset as u64),
            module: if let Some(k) = kernel {
                Some(
                    s.module
                        .as_deref()
                        .map(file_name)
                        .filter(|m| !m.contains("kallsyms") && !m.starts_with("vmlinux"))
                        .map(|m| m.trim_matches(['[', ']']).trim_end_matches(".ko").to_string())
                        .or_else(|| k.module_of(s.addr).map(str::to_string))
                        .unwrap_or_else(|| "kernel".into()),
                )
            } else {
                s.module.as_deref().map(file_name)
            },
            file: s.code_info.as_ref().map(|c| file_name(&c.file)),
            line: s.code_info.as_ref().and_then(|c| c.line),
            file_offset: None,
        },
        Symbolized::Unknown(_) => Name { module: kernel.map(|_| "kernel".into()), ..Default::default() },
    }
}

impl Symbols {
    /// With the symbol cache the environment asks for.
    pub fn new() -> Symbols {
        Symbols::with_cache(SymCache::from_env())
    }

    pub fn with_cache(disk: Option<SymCache>) -> Symbols {
        let sym = Symbolizer::builder().enable_code_info(true).enable_inlined_fns(false).build();
        let kallsyms = Kallsyms::read();
        Symbols {
            sym,
            maps: ProcMaps::default(),
            disk,
            cache: HashMap::new(),
            notes: kallsyms.hidden.iter().cloned().collect(),
            kallsyms,
            gone: Default::default(),
            why: HashMap::new(),
            own: (
                blazesym::helper::read_elf_build_id(Path::new("/proc/self/exe")).ok().flatten().map(|b| b.to_vec()),
                std::fs::metadata("/proc/self/exe").ok().map(|m| (m.dev(), m.ino())),
            ),
            unwind: Unwind::default(),
            vdso: VdsoFile::default(),
        }
    }

    /// Has blazesym read its own copy of `/proc/kallsyms` now (it reads it
    /// at the first kernel address it names): at set-up, not in the
    /// measured CPUs' first milliseconds, where each `read` of it held a
    /// probe off for 25-30 us (no preemption point inside, on a kernel
    /// without full preemption).
    pub fn warm(&mut self) {
        if self.kallsyms.hidden.is_none() && self.kallsyms.first_text != 0 {
            let _ = kernel_syms(&self.sym, &[self.kallsyms.first_text]);
        }
    }

    fn note(&mut self, n: String) {
        if !self.notes.contains(&n) {
            self.notes.push(n);
        }
    }

    /// Names `addrs` of `pid` (0: the kernel's), each looked up once.
    /// Return addresses (all but a stack's first) are looked up one byte
    /// back, inside the call.
    fn name(&mut self, pid: i32, addrs: &[(u64, bool)]) {
        let mut todo: Vec<u64> = {
            let mut v: Vec<u64> = addrs
                .iter()
                .filter(|(a, _)| !self.cache.contains_key(&(pid, *a)))
                .map(|&(a, ret)| if ret { a - 1 } else { a })
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        if todo.is_empty() {
            return;
        }
        let mut named: HashMap<u64, Name> = HashMap::new();
        // User code named in an earlier run of the same build.
        let keys = if pid == 0 { HashMap::new() } else { self.kept(pid, &todo, &mut named) };
        todo.retain(|a| !named.contains_key(a));
        let mut notes: Vec<String> = Vec::new();
        if !todo.is_empty() {
            self.look_up(pid, &todo, &mut named, &mut notes);
        }
        self.keep(&keys, &named, &mut notes);
        for n in notes {
            self.note(n);
        }
        self.remember(pid, addrs, &named);
    }

    /// Names `todo` of `pid` (0: the kernel's) with blazesym into `named`;
    /// `notes` say why frames are not named, and a process that cannot be
    /// read is counted gone.
    fn look_up(&mut self, pid: i32, todo: &[u64], named: &mut HashMap<u64, Name>, notes: &mut Vec<String>) {
        if pid != 0 {
            return self.look_up_user(pid, todo, named, notes);
        }
        let result = if self.kallsyms.hidden.is_some() { Err(None) } else { kernel_syms(&self.sym, todo) };
        match result {
            Ok(syms) => {
                for (a, s) in todo.iter().zip(syms) {
                    named.insert(*a, to_name(s, Some(&self.kallsyms)));
                }
            }
            Err(Some(e)) => notes.push(format!("kernel frames are not named: {e}")),
            Err(None) => {}
        }
    }

    /// Names `todo` of user process `pid` through the files its mappings
    /// showed when it was first seen (it may have exited since), each file
    /// read once; what no mapped file holds (the vDSO, a JIT's code)
    /// through the live process, if it lives.
    fn look_up_user(&mut self, pid: i32, todo: &[u64], named: &mut HashMap<u64, Name>, notes: &mut Vec<String>) {
        if !self.maps.seen(pid) {
            self.gone.insert(pid);
            return;
        }
        if todo.iter().any(|&a| self.maps.locate(pid, a).is_none()) {
            self.maps.refresh(pid);
        }
        // Per file its (address, offset)s; the rest for the live process.
        let mut by_file: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
        let mut missed: Vec<u64> = Vec::new();
        for &a in todo {
            match self.maps.locate(pid, a) {
                Some(Located::File(file, off)) => by_file.entry(file).or_default().push((a, off)),
                Some(Located::NoFile) | None => missed.push(a),
            }
        }
        // The vDSO's by its image (the same in every process).
        let in_vdso: Vec<(u64, u64)> =
            missed.iter().filter_map(|&a| Some((a, self.maps.vdso_offset(pid, a)?))).collect();
        if let (false, Some(path)) = (in_vdso.is_empty(), self.vdso.path()) {
            let offsets: Vec<u64> = in_vdso.iter().map(|x| x.1).collect();
            for (s, &(a, _)) in
                file_syms(&self.sym, path, &offsets, false).unwrap_or_default().into_iter().zip(&in_vdso)
            {
                let n = Name { module: Some(vdso::MODULE.into()), ..to_name(s, None) };
                if n.function.is_some() {
                    named.insert(a, n);
                }
            }
            missed.retain(|a| !named.contains_key(a));
        }
        for (file, addrs) in by_file {
            let module = self.maps.file(file).name.clone();
            let (syms, why) = match self.maps.file(file).read_path() {
                Some(path) => {
                    let offsets: Vec<u64> = addrs.iter().map(|&(_, off)| off).collect();
                    // By build ID (an overlay's descriptor may show another
                    // device), else by device and inode.
                    let own = match (&self.own.0, self.maps.build_id(file)) {
                        (Some(a), Some(b)) => a.as_slice() == b,
                        _ => {
                            self.own.1.is_some()
                                && std::fs::metadata(&path).ok().map(|m| (m.dev(), m.ino())) == self.own.1
                        }
                    };
                    // Nothing named: a stripped file (a few addresses outside
                    // every symbol do not make one).
                    let stripped =
                        |r: &Result<Vec<Symbolized>, Option<String>>| r.as_ref().is_ok_and(|s| s.iter().all(no_symbol));
                    let mut got = file_syms(&self.sym, &path, &offsets, !own);
                    // A stripped rtscope (its symbols in a debug file):
                    // through its debug link after all.
                    if own && stripped(&got) {
                        got = file_syms(&self.sym, &path, &offsets, true);
                    }
                    match got {
                        Ok(syms) => (syms, None),
                        Err(e) => (Vec::new(), Some(e.unwrap_or_else(|| "it could not be read".into()))),
                    }
                }
                None => (
                    Vec::new(),
                    Some(
                        "the file was replaced or deleted, or lies in another mount namespace, and rtscope could \
                         not hold it open (or held 256 files already)"
                            .into(),
                    ),
                ),
            };
            let stripped = syms.iter().any(no_symbol);
            if let Some(why) = why.or_else(|| stripped.then(|| STRIPPED.to_string())) {
                notes.push(format!(
                    "some user frames in {} are not named: {why}",
                    self.maps.file(file).path().display()
                ));
                self.why.insert(file, why);
            }
            for (i, &(a, off)) in addrs.iter().enumerate() {
                let mut n = syms.get(i).cloned().map(|s| to_name(s, None)).unwrap_or_default();
                n.module = Some(module.clone());
                n.file_offset = n.function.is_none().then_some(off);
                named.insert(a, n);
            }
        }
        if !missed.is_empty()
            && let Ok(syms) = user_syms(&self.sym, pid, &missed)
        {
            for (a, s) in missed.iter().zip(syms) {
                named.insert(*a, to_name(s, None));
            }
        }
    }

    /// Keeps in the symbol cache what the user addresses of `keys` (their
    /// build ID and file offset) were named; the cache's trouble, if any,
    /// into `notes`.
    fn keep(&mut self, keys: &HashMap<u64, (Vec<u8>, u64)>, named: &HashMap<u64, Name>, notes: &mut Vec<String>) {
        let Some(disk) = self.disk.as_mut() else { return };
        let mut by_build: HashMap<&[u8], Vec<(u64, Kept)>> = HashMap::new();
        for (a, (build, off)) in keys {
            if let Some(n) = named.get(a)
                && let Some(function) = &n.function
            {
                let k = Kept {
                    function: function.clone(),
                    offset: n.offset.unwrap_or(0),
                    file: n.file.clone(),
                    line: n.line,
                };
                by_build.entry(build.as_slice()).or_default().push((*off, k));
            }
        }
        for (build, names) in by_build {
            disk.put(build, &names);
        }
        if let Some(b) = disk.broken.clone() {
            notes.push(b);
        }
    }

    /// Each of `addrs` of `pid` with its name (the looked-up address's,
    /// its offset one further for a return address), once.
    fn remember(&mut self, pid: i32, addrs: &[(u64, bool)], named: &HashMap<u64, Name>) {
        for &(a, ret) in addrs {
            let looked = if ret { a - 1 } else { a };
            let mut n = named.get(&looked).cloned().unwrap_or_default();
            if ret && let Some(o) = n.offset.as_mut() {
                *o += 1;
            }
            self.cache.entry((pid, a)).or_insert(n);
        }
    }

    /// Names `todo` of user process `pid` from the symbol cache into
    /// `named`; returns the (build ID, file offset) of the others that
    /// belong to a file with a build ID, to keep what they are named.
    fn kept(&mut self, pid: i32, todo: &[u64], named: &mut HashMap<u64, Name>) -> HashMap<u64, (Vec<u8>, u64)> {
        let mut keys = HashMap::new();
        if self.disk.is_none() || !self.maps.seen(pid) {
            return keys;
        }
        for &a in todo {
            let Some(Located::File(file, off)) = self.maps.locate(pid, a) else { continue };
            let Some(build) = self.maps.build_id(file).map(<[u8]>::to_vec) else { continue };
            let Some(disk) = self.disk.as_mut() else { return keys };
            match disk.get(&build, off) {
                Some(k) => {
                    let module = Some(self.maps.file(file).name.clone());
                    named.insert(
                        a,
                        Name {
                            function: Some(k.function),
                            offset: Some(k.offset),
                            module,
                            file: k.file,
                            line: k.line,
                            file_offset: None,
                        },
                    );
                }
                None => {
                    keys.insert(a, (build, off));
                }
            }
        }
        keys
    }

    fn frames(&mut self, pid: i32, addrs: &[u64]) -> Vec<Frame> {
        let marked: Vec<(u64, bool)> = addrs.iter().enumerate().map(|(i, &a)| (a, i > 0 && a > 0)).collect();
        self.name(pid, &marked);
        addrs
            .iter()
            .map(|&a| {
                let n = self.cache.get(&(pid, a)).cloned().unwrap_or_default();
                Frame {
                    addr: a,
                    function: n.function,
                    offset: n.offset,
                    module: n.module,
                    file: n.file,
                    line: n.line,
                    file_offset: n.file_offset,
                }
            })
            .collect()
    }

    /// Kernel frames, innermost first.
    pub fn kernel(&mut self, addrs: &[u64]) -> Vec<Frame> {
        self.frames(0, addrs)
    }

    /// User frames of process `pid`, innermost first.
    pub fn user(&mut self, pid: i32, addrs: &[u64]) -> Vec<Frame> {
        // A frame-pointer walk through code built without frame pointers
        // reads data as return addresses: it ends at the first address
        // that no user mapping can hold.
        let addrs: Vec<u64> = addrs.iter().copied().take_while(|&a| unwind::user(a)).collect();
        if pid <= 0 || addrs.is_empty() {
            return Vec::new();
        }
        self.frames(pid, &addrs)
    }

    /// How the profiler's user stacks were unwound, their count by
    /// unwinder, the time and the bytes; None where none was.
    pub fn unwound(&self) -> Option<String> {
        let st = &self.unwind.stats;
        (st.time.stats.count > 0).then(|| {
            let by: Vec<String> = st.by.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let p50 = rtscope_model::hist::quantile(&st.time.hist, &st.time.stats, 0.5);
            format!(
                "user stacks of {} samples unwound with the programs' own unwind tables in the symbols thread ({}; \
                 dwarf: every step by the files' tables, dwarf+fp: some by frame pointers, fp: the kernel's \
                 frame-pointer walk), {:.1} us of CPU each at the median (max {:.1} us: the first of a process reads \
                 its files' tables), {:.1} kB of stack copied each on average",
                st.time.stats.count,
                by.join(", "),
                p50 as f64 / 1e3,
                st.time.stats.max as f64 / 1e3,
                st.bytes as f64 / st.time.stats.count as f64 / 1024.0
            )
        })
    }

    /// Notes on what could not be named, with the fixes.
    pub fn all_notes(&self) -> Vec<String> {
        let mut n = self.notes.clone();
        if !self.gone.is_empty() {
            n.push(format!(
                "the user frames of {} processes were not named: they had exited before rtscope read their maps \
                 (short-lived processes, or whose maps could not be read)",
                self.gone.len()
            ));
        }
        n
    }

    /// A profiler sample's user frames, named, and the walk that gave
    /// them: with the files' own tables where the sample carries its
    /// registers and stack, else the kernel's frame-pointer walk.
    fn sample_user(&mut self, s: &PerfSample) -> (Vec<Frame>, Option<&'static str>) {
        let (addrs, by) = self.unwind.user(&mut self.maps, s.pid, s.stack.as_deref(), &s.user);
        let user = self.user(s.pid, &addrs);
        let by = (!user.is_empty()).then_some(by);
        (user, by)
    }

    /// A profiler sample's user frames, unwound as [`Symbols::sample_stack`]
    /// does but not named (addresses, innermost first): for a caller that
    /// counts stacks and names each distinct one later. Its process's maps
    /// are read first where they do not hold its address.
    pub fn unwind_sample(&mut self, s: &PerfSample) -> Vec<u64> {
        if let Some(a) = s.stack.as_ref().map(|st| st.ip).or(s.user.first().copied()).filter(|&a| unwind::user(a)) {
            self.maps.seen_at(s.pid, a);
        }
        self.unwind.user(&mut self.maps, s.pid, s.stack.as_deref(), &s.user).0
    }

    /// A profiler sample as stacks, named.
    pub fn sample_stack(&mut self, s: &PerfSample, comm: &str) -> CodeStack {
        let kernel = self.kernel(&s.kernel);
        let (user, by) = self.sample_user(s);
        CodeStack {
            taken: CodeStack::SAMPLE.into(),
            t_ns: s.t_ns,
            pid: s.tid,
            comm: comm.to_string(),
            kernel,
            user,
            notes: Vec::new(),
            unwind_ns: None,
            unwinder: by.map(str::to_string),
        }
    }

    /// The stacks of a wake-up, named; the tracing code's own frames at
    /// the top of the kernel stack are left out.
    pub fn code_stack(&mut self, w: &WakeStack, comm: &str) -> CodeStack {
        let mut kernel = self.kernel(&w.kernel);
        let own = kernel
            .iter()
            .take_while(|f| {
                f.function.as_deref().is_some_and(|n| {
                    n.starts_with("trace_event_raw_event")
                        || n.starts_with("__traceiter_")
                        || n.starts_with("perf_trace_")
                })
            })
            .count();
        kernel.drain(..own);
        let user = self.user(w.tgid, &w.user);
        let mut notes = Vec::new();
        if let Some(h) = &self.kallsyms.hidden {
            notes.push(h.clone());
        }
        if !w.user.is_empty() && user.iter().all(|f| f.function.is_none()) {
            let why = w.user.iter().find_map(|&a| match self.maps.locate(w.tgid, a) {
                Some(Located::File(f, _)) => self.why.get(&f).map(|y| format!("{}: {y}", self.maps.file(f).name)),
                _ => None,
            });
            notes.push(if self.gone.contains(&w.tgid) {
                format!(
                    "the user frames of {comm} (pid {}) could not be named: it had exited before rtscope could read \
                     its maps",
                    w.tgid
                )
            } else if let Some(why) = why {
                format!("the user frames of {comm} (pid {}) could not be named: {why}", w.tgid)
            } else {
                format!(
                    "the user frames of {comm} (pid {}) could not be named (the notes after the episodes say why)",
                    w.tgid
                )
            });
        }
        // The kernel's `userstacktrace`: a frame-pointer walk.
        let unwinder = (!user.is_empty()).then(|| unwind::FP.to_string());
        CodeStack {
            taken: CodeStack::WAKE_UP.into(),
            t_ns: w.ts,
            pid: w.pid,
            comm: comm.to_string(),
            kernel,
            user,
            notes,
            unwind_ns: (!w.kernel.is_empty() || !w.user.is_empty()).then_some(w.unwind_ns),
            unwinder,
        }
    }

    /// A window's samples, named: rows by innermost function and the
    /// folded stacks.
    pub fn window(&mut self, samples: &[PerfSample], expected: f64) -> WindowSamples {
        let mut rows: BTreeMap<(String, String), u64> = BTreeMap::new();
        let mut folded: BTreeMap<String, u64> = BTreeMap::new();
        let mut irqs_off: Option<u64> = None;
        let mut unwinders: BTreeMap<String, u64> = BTreeMap::new();
        for s in samples {
            let k = self.kernel(&s.kernel);
            let (u, by) = self.sample_user(s);
            if let Some(by) = by {
                *unwinders.entry(by.to_string()).or_default() += 1;
            }
            let leaf = k.first().or(u.first());
            if let Some(f) = leaf {
                let key = (f.name(), f.module.clone().unwrap_or_else(|| "?".into()));
                *rows.entry(key).or_default() += 1;
            }
            *folded.entry(fold(&u, &k)).or_default() += 1;
            if let Some(off) = s.irqs_off {
                *irqs_off.get_or_insert(0) += u64::from(off);
            }
        }
        let mut rows: Vec<SampleRow> =
            rows.into_iter().map(|((function, module), samples)| SampleRow { function, module, samples }).collect();
        rows.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.function.cmp(&b.function)));
        let mut folded: Vec<Folded> = folded.into_iter().map(|(stack, samples)| Folded { stack, samples }).collect();
        folded.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.stack.cmp(&b.stack)));
        WindowSamples { samples: samples.len() as u64, expected, irqs_off, rows, folded, unwinders }
    }

    /// The functions over-represented inside episodes: each function's
    /// share of the samples inside episodes against its share outside.
    pub fn over(&mut self, counts: &Counts) -> Vec<OverRow> {
        let mut by_pid: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
        for &(pid, a) in counts.by_addr.keys() {
            by_pid.entry(pid).or_default().push(a);
        }
        for (pid, addrs) in &by_pid {
            let marked: Vec<(u64, bool)> = addrs.iter().map(|&a| (a, false)).collect();
            self.name(*pid, &marked);
        }
        let mut by_fn: BTreeMap<(String, String), [u64; 2]> = BTreeMap::new();
        for (&(pid, a), v) in &counts.by_addr {
            let n = self.cache.get(&(pid, a)).cloned().unwrap_or_default();
            let function = n.function.unwrap_or_else(|| if pid == 0 { "?".into() } else { format!("pid {pid}") });
            let module = n.module.unwrap_or_else(|| "?".into());
            let e = by_fn.entry((function, module)).or_insert([0; 2]);
            e[0] += v[0];
            e[1] += v[1];
        }
        rank_over(by_fn)
    }
}

/// Ranks functions by (share inside) / (share outside), those with at
/// least 3 samples inside, at most 15.
pub fn rank_over(by_fn: BTreeMap<(String, String), [u64; 2]>) -> Vec<OverRow> {
    let inside: u64 = by_fn.values().map(|v| v[0]).sum();
    let outside: u64 = by_fn.values().map(|v| v[1]).sum();
    if inside == 0 {
        return Vec::new();
    }
    let mut rows: Vec<OverRow> = by_fn
        .into_iter()
        .filter(|(_, v)| v[0] >= 3)
        .map(|((function, module), v)| {
            let share_in = v[0] as f64 / inside as f64;
            let share_out = v[1].max(1) as f64 / outside.max(1) as f64;
            OverRow { function, module, inside: v[0], outside: v[1], ratio: share_in / share_out }
        })
        .filter(|r| r.ratio > 1.0)
        .collect();
    rows.sort_by(|a, b| b.ratio.total_cmp(&a.ratio).then(b.inside.cmp(&a.inside)));
    rows.truncate(15);
    rows
}

/// A sample's stack folded root first: user frames (outermost first),
/// then kernel frames, `;`-separated.
pub fn fold(user: &[Frame], kernel: &[Frame]) -> String {
    let mut parts: Vec<String> = user.iter().rev().map(Frame::name).collect();
    parts.extend(kernel.iter().rev().map(|f| format!("{} [k]", f.name())));
    if parts.is_empty() {
        parts.push("?".into());
    }
    parts.join(";")
}

/// The symbols thread (with `s`, set up before the probe's threads
/// start): names each kept episode's code, forwards every
/// message to the writer in order, and at the end ranks the functions
/// over-represented in episodes. `hw`: the profiler samples by NMI.
pub fn run(mut s: Symbols, rx: Receiver<SymMsg>, tx: Sender<EpisodeMsg>, hw: bool) -> SymReport {
    let mut report = SymReport::default();
    for msg in rx {
        match msg {
            SymMsg::Pass(m) => {
                let _ = tx.send(m);
            }
            SymMsg::Keep(mut e, raw) => {
                if let Some((w, comm)) = &raw.stack {
                    e.stack = Some(s.code_stack(w, comm));
                }
                if let Some((x, comm)) = &raw.blocker {
                    e.blocker = Some(s.sample_stack(x, comm));
                }
                if raw.period_ns > 0 {
                    let window = e.woke_ns.saturating_sub(e.programmed_ns);
                    e.samples = Some(s.window(&raw.samples, window as f64 / raw.period_ns as f64));
                }
                if let Some(g) = &raw.gap {
                    e.remainder = Some(remainder(g, e.stack.as_ref(), hw));
                }
                let _ = tx.send(EpisodeMsg::Keep(e));
            }
            SymMsg::Seen(seen) => {
                for (pid, addr) in seen {
                    s.maps.seen_at(pid, addr);
                }
            }
            SymMsg::Mapped(told) => {
                for m in told {
                    s.maps.told(m);
                }
            }
            SymMsg::Finish(counts) => {
                report.over = s.over(&counts);
            }
        }
    }
    report.notes = s.all_notes();
    report.unwound = s.unwound();
    report
}

#[cfg(test)]
#[path = "symbols_tests.rs"]
mod tests;
