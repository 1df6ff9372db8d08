//! Tests of `symbols`.

use super::*;

/// Says `why` a test is skipped (on stderr itself, past the harness's
/// capture); under CI, where what it needs is installed, fails instead.
/// The same rule as tests/common's `has`, which this crate cannot use.
fn skip_unless_ci(why: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| !["", "0", "false"].contains(&v.as_str()));
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    assert!(!ci, "{test} needs what CI has: {why}");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
}

#[inline(never)]
fn a_named_function() -> u64 {
    std::hint::black_box(42)
}

/// Root or not: this process's own function is named from its ELF
/// symbols, with its file.
#[test]
fn names_a_function_of_this_process() {
    let mut s = Symbols::with_cache(None);
    let f = a_named_function as *const () as u64;
    let frames = s.user(std::process::id() as i32, &[f + 1]);
    let name = frames[0].function.as_deref().unwrap_or_default();
    assert!(name.contains("a_named_function"), "{frames:?}");
    assert!(frames[0].module.as_deref().is_some_and(|m| !m.is_empty()), "{frames:?}");
    assert_eq!(frames[0].offset, Some(1));
    // A frame-pointer walk that read data (here ASCII) ends there.
    let walked = s.user(std::process::id() as i32, &[f + 1, 0x3631_3637_3038_3935, f + 2]);
    assert_eq!(walked.len(), 1, "{walked:?}");
}

/// The kernel's own functions are named where kallsyms shows addresses.
#[test]
fn a_name_found_once_is_kept_for_the_next_run_of_the_build() {
    let dir = std::env::temp_dir().join(format!("rtscope-symbols-kept-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let f = a_named_function as *const () as u64;
    let pid = std::process::id() as i32;
    let mut first = Symbols::with_cache(Some(SymCache::at(&dir)));
    let named = first.user(pid, &[f + 1]);
    let disk = first.disk.as_ref().unwrap();
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    if blazesym::helper::read_elf_build_id(&exe).ok().flatten().is_none() {
        // A test binary linked without a build ID has nothing to key on.
        assert!(disk.added == 0 && std::fs::read_dir(&dir).is_err(), "nothing kept, nothing written");
        eprintln!("skipped: {} has no build ID", exe.display());
        return;
    }
    assert_eq!(disk.added, 1);
    assert_eq!((disk.hits, disk.broken.as_deref()), (0, None));
    let mut second = Symbols::with_cache(Some(SymCache::at(&dir)));
    let again = second.user(pid, &[f + 1]);
    assert_eq!(second.disk.as_ref().unwrap().hits, 1, "found in the cache");
    assert_eq!(named[0].function, again[0].function);
    assert!(again[0].function.as_deref().is_some_and(|n| n.contains("a_named_function")), "{again:?}");
    assert_eq!(
        (named[0].module.clone(), named[0].offset, named[0].line),
        (again[0].module.clone(), again[0].offset, again[0].line)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A process that has exited is named from the mappings read when it
/// was seen (the reader's first sight of it), not when its episode is
/// named; one never seen is counted gone and said so.
#[test]
fn names_a_process_that_exited_after_it_was_seen() {
    // The C library's clock_nanosleep, in this process and in a child
    // `sleep` (the same file, at another address).
    let here = libc::clock_nanosleep as *const () as u64;
    let own = std::process::id() as i32;
    let mut maps = ProcMaps::default();
    assert!(maps.seen(own));
    let Some(Located::File(libc_file, off)) = maps.locate(own, here) else { panic!("the C library is mapped") };
    let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep runs");
    let pid = child.id() as i32;
    let mut seen = Symbols::with_cache(None);
    let mut addr = None;
    for _ in 0..200 {
        // Once the dynamic loader has mapped the C library.
        maps.refresh(pid);
        addr = maps.address_of(pid, libc_file, off);
        if addr.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let Some(addr) = addr else {
        child.kill().unwrap();
        child.wait().unwrap();
        skip_unless_ci("sleep does not map this test's C library (static, or another libc)");
        return;
    };
    seen.maps.seen_at(pid, addr);
    let mut unseen = Symbols::with_cache(None);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "reaped");
    let frames = seen.user(pid, &[addr]);
    assert!(frames[0].function.as_deref().is_some_and(|n| n.contains("clock_nanosleep")), "{frames:?}");
    assert!(frames[0].module.as_deref().is_some_and(|m| m.starts_with("libc")), "{frames:?}");
    let lost = unseen.user(pid, &[addr]);
    assert_eq!(lost[0].function, None, "{lost:?}");
    assert!(unseen.all_notes().iter().any(|n| n.contains("had exited")), "{:?}", unseen.all_notes());
}

/// Code in a stripped file (Debian's `sleep`: no symbol table, and no
/// function among its dynamic symbols) is not named, and the episode's
/// stack says which file and why, as do the notes after the episodes.
#[test]
fn says_which_stripped_file_left_a_frame_unnamed() {
    let sleep = std::path::Path::new("/usr/bin/sleep");
    let stripped = std::fs::read(sleep).ok().is_some_and(|b| !b.windows(8).any(|w| w == b".symtab\0"));
    // Its separate debug file, where installed (coreutils-dbgsym), names it.
    let debug = blazesym::helper::read_elf_build_id(sleep).ok().flatten().is_some_and(|id| {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        std::path::Path::new(&format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..])).exists()
    });
    if !stripped || debug {
        skip_unless_ci("/usr/bin/sleep is missing, keeps its symbol table, or has its debug file installed here");
        return;
    }
    let mut child = std::process::Command::new(sleep).arg("30").spawn().expect("sleep runs");
    let pid = child.id() as i32;
    let mut text = None;
    for _ in 0..200 {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        text = maps.lines().find(|l| l.ends_with("/usr/bin/sleep") && l.contains(" r-xp ")).and_then(|l| {
            let mut f = l.split_whitespace();
            let (a, b) = f.next()?.split_once('-')?;
            let off = u64::from_str_radix(f.nth(1)?, 16).ok()?;
            Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?, off))
        });
        if text.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let Some((start, end, off)) = text else {
        child.kill().unwrap();
        child.wait().unwrap();
        skip_unless_ci("/usr/bin/sleep maps no code of its own here (a multi-call binary)");
        return;
    };
    let addr = start + (end - start) / 2;
    let mut s = Symbols::with_cache(None);
    let w = WakeStack { ts: 1, woken: 1, pid, user: vec![addr], tgid: pid, ..Default::default() };
    let stack = s.code_stack(&w, "sleep");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(stack.user.len(), 1, "{stack:?}");
    assert_eq!((stack.user[0].function.as_deref(), stack.user[0].module.as_deref()), (None, Some("sleep")));
    // Its place in the file, for debug symbols installed later.
    let at = addr - start + off;
    assert_eq!(stack.user[0].file_offset, Some(at));
    assert_eq!(stack.user[0].label(), format!("{addr:#x} (sleep+{at:#x})"));
    let said = format!("the user frames of sleep (pid {pid}) could not be named: sleep: it is stripped");
    assert!(stack.notes.iter().any(|n| n.starts_with(&said)), "{:?}", stack.notes);
    let notes = s.all_notes();
    let said = "some user frames in /usr/bin/sleep are not named: it is stripped";
    assert!(notes.iter().any(|n| n.starts_with(said)), "{notes:?}");
}

/// Root only: a process that lived a few milliseconds, never read from
/// /proc, is named from the kernel's records of its exec and mappings.
#[test]
fn names_a_short_lived_process_from_the_kernels_mapping_records() {
    if !rustix::process::geteuid().is_root() {
        return skip_unless_ci("the kernel's mapping records need root");
    }
    let here = libc::clock_nanosleep as *const () as u64;
    let own = std::process::id() as i32;
    let mut s = Symbols::with_cache(None);
    assert!(s.maps.seen(own));
    let Some(Located::File(libc_file, off)) = s.maps.locate(own, here) else { panic!("the C library is mapped") };
    let mut watches: Vec<crate::sys::perf::MapWatch> =
        crate::sys::cpu::online().iter().map(|&c| crate::sys::perf::MapWatch::open(c, 16).unwrap()).collect();
    let mut child = std::process::Command::new("sh").arg("-c").arg("exec sleep 0.005").spawn().expect("sh runs");
    let pid = child.id() as i32;
    child.wait().unwrap();
    let mut told = Vec::new();
    for w in &mut watches {
        w.drain(&mut |t, m| told.push((t, m)));
    }
    told.sort_by_key(|x| x.0);
    let told: Vec<_> = told.into_iter().map(|x| x.1).collect();
    use crate::sys::perf::MapEvent;
    assert!(told.contains(&MapEvent::Exec(pid)), "{pid}'s exec told: {told:#?}");
    assert!(told.iter().any(|m| matches!(m, MapEvent::Mmap(x) if x.pid == pid)), "{pid}'s mappings told: {told:#?}");
    for m in told {
        s.maps.told(m);
    }
    let Some(addr) = s.maps.address_of(pid, libc_file, off) else {
        return skip_unless_ci("sleep does not map this test's C library (static, or another libc)");
    };
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "reaped");
    let frames = s.user(pid, &[addr]);
    assert!(frames[0].function.as_deref().is_some_and(|n| n.contains("clock_nanosleep")), "{frames:?}");
    assert!(frames[0].module.as_deref().is_some_and(|m| m.starts_with("libc")), "{frames:?}");
}

/// Debian's detached debug files (libc6-dbg, the -dbgsym packages)
/// compress their DWARF with zlib: the C library's malloc is named with
/// its source file from them. Without the package installed, skipped.
#[test]
fn reads_a_compressed_debug_file() {
    let here = libc::malloc as *const () as u64;
    let pid = std::process::id() as i32;
    let mut s = Symbols::with_cache(None);
    assert!(s.maps.seen(pid));
    let Some(Located::File(file, _)) = s.maps.locate(pid, here) else { panic!("malloc is mapped") };
    let debug = s.maps.build_id(file).map(|b| {
        let id: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..])
    });
    let Some(debug) = debug.filter(|d| std::path::Path::new(d).exists()) else {
        // CI installs it (.ci/run).
        skip_unless_ci(&format!("no detached debug file for {} (apt-get install libc6-dbg)", s.maps.file(file).name));
        return;
    };
    let f = &s.user(pid, &[here])[0];
    assert!(f.function.as_deref().is_some_and(|n| n.contains("malloc")), "{f:?}");
    assert_eq!(f.file.as_deref(), Some("malloc.c"), "the line table read from {debug}: {f:?}");
}

#[test]
fn names_kernel_addresses_or_says_why_not() {
    let mut s = Symbols::with_cache(None);
    let Some(line) = std::fs::read_to_string("/proc/kallsyms")
        .ok()
        .and_then(|t| t.lines().find(|l| l.ends_with(" schedule") || l.ends_with(" do_idle")).map(str::to_string))
    else {
        return;
    };
    let addr = u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap();
    let f = &s.kernel(&[addr + 4])[0];
    if addr == 0 {
        assert!(s.notes.iter().any(|n| n.contains("kptr_restrict")), "{:?}", s.notes);
    } else {
        let want = line.split_whitespace().nth(2).unwrap();
        assert_eq!(f.function.as_deref(), Some(want), "{f:?}");
        assert_eq!(f.module.as_deref(), Some("kernel"));
    }
}

#[test]
fn kallsyms_says_hidden_from_text_symbols_and_knows_modules() {
    // Kernels before 6.15 list per-CPU symbols at zero first: not hidden.
    let text = "0000000000000000 A fixed_percpu_data\n\
                0000000000000000 A __per_cpu_start\n\
                ffffffff81000000 T _stext\n\
                ffffffff81000100 t do_one_initcall\n\
                ffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]\n\
                ffffffffc0a02000 t e1000_clean\t[e1000e]\n\
                ffffffffc0a01000 T e1000_xmit_frame\t[e1000e]\n\
                ffffffffc0b00010 t nf_hook_slow\t[nf_tables]\n";
    let k = Kallsyms::parse(text, "0");
    assert!(k.hidden.is_none(), "{:?}", k.hidden);
    assert_eq!(k.module_of(0xffff_ffff_c0a0_2000), Some("e1000e"));
    assert_eq!(k.module_of(0xffff_ffff_c0a0_1000), Some("e1000e"));
    assert_eq!(k.module_of(0xffff_ffff_c0b0_0010), Some("nf_tables"));
    assert_eq!(k.module_of(0xffff_ffff_8100_0100), None, "the kernel's own");
    assert_eq!(k.module_of(0xffff_ffff_c020_1000), None, "a builtin trampoline is the kernel's");
    // kptr_restrict: every address reads as zero.
    let k = Kallsyms::parse("0000000000000000 A fixed_percpu_data\n0000000000000000 T _stext\n", "2");
    assert!(k.hidden.as_deref().is_some_and(|h| h.contains("kptr_restrict = 2")), "{:?}", k.hidden);
}

#[test]
fn folds_root_first_and_ranks_over_representation() {
    let f = |n: &str| Frame { function: Some(n.into()), ..Default::default() };
    assert_eq!(fold(&[f("burst"), f("main")], &[f("irq"), f("entry")]), "main;burst;entry [k];irq [k]");
    let mut by: BTreeMap<(String, String), [u64; 2]> = BTreeMap::new();
    by.insert(("dup_mmap".into(), "kernel".into()), [30, 1]);
    by.insert(("idle".into(), "kernel".into()), [10, 900]);
    by.insert(("rare".into(), "kernel".into()), [2, 0]);
    let rows = rank_over(by);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].function, "dup_mmap");
    assert!(rows[0].ratio > 100.0);
}

/// Reads the clock until `until` (the vDSO's code, without frame
/// pointers, below it).
#[inline(never)]
fn spin_on_the_clock(until: u64) -> u64 {
    let mut reads = 0u64;
    while crate::sys::clock::now() < until {
        reads += 1;
    }
    std::hint::black_box(reads)
}

/// Root only: the profiler's samples of this thread, spinning on the
/// clock (in the vDSO), carry its registers and stack, and are unwound
/// with the tables (the vDSO's, this file's) through to the spinning
/// function; a sample without them is the kernel's frame-pointer walk.
#[cfg(target_arch = "x86_64")]
#[test]
fn samples_are_unwound_with_the_programs_tables() {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    let _machine = crate::machine_lock();
    let cpu = *crate::sys::cpu::online().last().unwrap();
    let hz = 2000;
    let pages = crate::sys::perf::ring_pages(hz, crate::sys::perf::stack_bytes(hz));
    let mut sampler = match crate::sys::perf::Sampler::open(cpu, hz, pages) {
        Ok(s) => s,
        Err(e) => return skip_unless_ci(&format!("no sampler: {e}")),
    };
    assert_eq!((sampler.stack_bytes, sampler.no_stack_because.as_deref()), (8192, None));
    crate::sys::cpu::pin_self(&[cpu]).unwrap();
    sampler.enable(true).unwrap();
    spin_on_the_clock(crate::sys::clock::now() + 100_000_000);
    sampler.enable(false).unwrap();
    // This thread's: the test binary's other threads may run there too.
    let me = crate::sys::sched::thread_id();
    let mut mine = Vec::new();
    sampler.drain(&mut |x| {
        if x.tid == me && x.kernel.is_empty() {
            mine.push(x)
        }
    });
    assert_eq!(sampler.lost(), 0, "the ring holds 100 ms of samples with their stacks");
    assert!(mine.len() >= 20, "{} samples of this thread in user space", mine.len());
    let mut s = Symbols::with_cache(None);
    let (mut named, mut by) = (0, BTreeMap::new());
    for x in &mine {
        assert!(x.stack.as_ref().is_some_and(|st| st.ip == x.user[0] && !st.bytes.is_empty()), "{x:?}");
        let st = s.sample_stack(x, "test");
        *by.entry(st.unwinder.clone().unwrap_or_default()).or_insert(0) += 1;
        named += usize::from(st.user.iter().any(|f| f.name().contains("spin_on_the_clock")));
    }
    eprintln!("{named} of {} samples named spin_on_the_clock; unwinders {by:?}; {:?}", mine.len(), s.unwound());
    assert!(named * 10 >= mine.len() * 9, "{named} of {} samples name it ({by:?})", mine.len());
    assert!(by.keys().all(|k| k.starts_with("dwarf")), "{by:?}");
    // Without its registers and stack: the kernel's walk.
    let bare = crate::sys::perf::PerfSample { stack: None, ..mine[0].clone() };
    assert_eq!(s.sample_stack(&bare, "test").unwinder.as_deref(), Some(unwind::FP));
}

/// A frame in the vDSO is named by the vDSO's own symbols (its image,
/// rtscope's own copy), module `[vdso]`, without the live process.
#[test]
fn vdso_frames_are_named() {
    let mut file = VdsoFile::default();
    let Some(path) = file.path().map(Path::to_path_buf) else {
        return skip_unless_ci("no vDSO image to read here");
    };
    use blazesym::inspect::{Inspector, source};
    let inspector = Inspector::new();
    let found = inspector.lookup(&source::Source::Elf(source::Elf::new(&path)), &["__vdso_clock_gettime"]);
    let Some(off) = found.ok().and_then(|f| f.first()?.first()?.file_offset) else {
        return skip_unless_ci("this vDSO has no __vdso_clock_gettime");
    };
    let base = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .find(|l| l.ends_with("[vdso]"))
        .and_then(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
        .unwrap();
    let mut s = Symbols::with_cache(None);
    let frames = s.user(std::process::id() as i32, &[base + off + 4]);
    let f = &frames[0];
    assert!(f.function.as_deref().is_some_and(|n| n.contains("clock_gettime")), "{f:?}");
    assert_eq!(f.module.as_deref(), Some("[vdso]"), "{f:?}");
}
