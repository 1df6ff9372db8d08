//! A sampling profiler on one CPU through `perf_event_open(2)`: the
//! hardware `cycles` event where the machine has a PMU (sampled through
//! the NMI, so it sees code that runs with interrupts off), the software
//! `cpu-clock` event otherwise (sampled from an hrtimer interrupt: it
//! cannot see code with interrupts off, nor time the hypervisor takes).
//! Each sample carries its CLOCK_MONOTONIC time, its task and its kernel
//! and user call chains (the user one a frame-pointer walk) and, on x86-64,
//! the interrupted task's user registers and the top of its user stack
//! ([`UserStack`]), for an unwind with the program's own tables later, off
//! the measured CPUs ([`crate::trace::unwind`]); the ring is read without
//! blocking by the trace reader thread. [`MapWatch`] reads the kernel's side-band records of
//! every process that maps code or runs `exec`, for the user frames of
//! processes that have exited by the time their frames are named. `open`
//! and `Attr::tracepoint` open the counting events of syscount.rs too.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_COUNT_SW_DUMMY: u64 = 9;

const SAMPLE_IP: u64 = 1 << 0;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_CALLCHAIN: u64 = 1 << 5;
const SAMPLE_REGS_USER: u64 = 1 << 12;
const SAMPLE_STACK_USER: u64 = 1 << 13;
const SAMPLE_REGS_INTR: u64 = 1 << 18;

// perf_event_attr flag bits.
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_MMAP: u64 = 1 << 8;
const FLAG_COMM: u64 = 1 << 9;
const FLAG_FREQ: u64 = 1 << 10;
const FLAG_TASK: u64 = 1 << 13;
const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
const FLAG_MMAP2: u64 = 1 << 23;
const FLAG_COMM_EXEC: u64 = 1 << 24;
const FLAG_USE_CLOCKID: u64 = 1 << 25;

/// x86's flags register in `sample_regs_intr`: bit PERF_REG_X86_FLAGS of
/// the mask, 9 in the uapi's enum (AX, BX, CX, DX, SI, DI, BP, SP, IP,
/// FLAGS, ...), and the register's interrupt-enable bit, also bit 9.
#[cfg(target_arch = "x86_64")]
const PERF_REG_X86_FLAGS: u32 = 9;
#[cfg(target_arch = "x86_64")]
const REG_X86_FLAGS: u64 = 1 << PERF_REG_X86_FLAGS;
const X86_IF: u64 = 1 << 9;
/// x86's user registers an unwind needs, in `sample_regs_user`: BP, SP and
/// IP (bits 6, 7 and 8 of the uapi's enum); the kernel writes them in that
/// order.
#[cfg(target_arch = "x86_64")]
const REGS_USER: u64 = (1 << 6) | (1 << 7) | (1 << 8);

/// The most user stack a sample copies: perf's own default for `--call-graph
/// dwarf`, some 30-100 frames of C, C++ or Rust. The kernel copies it in the
/// sampling interrupt, on the measured CPU, and the ring carries it whole
/// whatever the stack's depth: see [`stack_bytes`].
pub const STACK_MAX: u32 = 8192;
/// The user stack's copies are kept under this many bytes a second per CPU
/// (2 kHz with [`STACK_MAX`]): at higher rates each copies less.
const STACK_BYTES_PER_S: u64 = 16 << 20;
/// The least user stack worth copying (a few frames).
const STACK_MIN: u32 = 1024;

const RECORD_LOST: u32 = 2;
const RECORD_COMM: u32 = 3;
const RECORD_FORK: u32 = 7;
const RECORD_SAMPLE: u32 = 9;
const RECORD_MMAP2: u32 = 10;
/// In a COMM record's header: the name changed by `exec`.
const MISC_COMM_EXEC: u16 = 1 << 13;
/// In an MMAP2 record's header: a build ID where device and inode are.
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// Values at or above this in a call chain are context markers.
const CONTEXT_MAX: u64 = (-4095i64) as u64;
const CONTEXT_KERNEL: u64 = (-128i64) as u64;
const CONTEXT_USER: u64 = (-512i64) as u64;

/// perf_event_open's flag: the descriptor closes on exec.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;

/// The size of the first published `perf_event_attr` (PERF_ATTR_SIZE_VER0).
const ATTR_SIZE_VER0: u32 = 64;

/// Frames kept per chain.
pub const MAX_FRAMES: usize = 64;

/// `struct perf_event_attr` (PERF_ATTR_SIZE_VER8, 136 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period_or_freq: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    reserved_3: u32,
    sig_data: u64,
    config3: u64,
}

/// Which event samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Hardware `cycles`, sampled by NMI.
    Cycles,
    /// Software `cpu-clock`, sampled by an hrtimer interrupt.
    CpuClock,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Cycles => "cycles (hardware, NMI)",
            Source::CpuClock => "cpu-clock (software, timer interrupt)",
        }
    }

    /// What the samples cannot see.
    pub fn blind_spot(self) -> &'static str {
        match self {
            Source::Cycles => "time the hypervisor takes (the guest's counter stops)",
            Source::CpuClock => {
                "code that runs with interrupts off (its samples land where interrupts are enabled again) and \
                 time the hypervisor takes"
            }
        }
    }
}

mod record;
pub use record::{Layout, Mmap2, PerfSample, UserStack, parse_mmap2, parse_sample, u16_at, u32_at, u64_at};

/// How many bytes of user stack a sample copies at `hz` samples a second:
/// [`STACK_MAX`], less at rates where that would exceed
/// [`STACK_BYTES_PER_S`], in steps of 512 bytes, at least [`STACK_MIN`].
pub fn stack_bytes(hz: u64) -> u32 {
    let fit = (STACK_BYTES_PER_S / hz.max(1)).min(STACK_MAX as u64) as u32;
    (fit / 512 * 512).max(STACK_MIN)
}

/// Data pages of a profiler's ring at `hz` for a stack copy of `stack`
/// bytes: some 125 ms of samples (the reader drains it every 10 ms, later
/// when the machine is busy), a power of two from 64 pages (256 kB) to 512
/// (2 MB) per CPU.
pub fn ring_pages(hz: u64, stack: u32) -> usize {
    // A sample's record beside its stack: chains of up to 64 frames each.
    let per_sample = stack as u64 + 1200;
    let bytes = hz.saturating_mul(per_sample) / 8;
    (bytes.div_ceil(4096) as usize).next_power_of_two().clamp(64, 512)
}

/// A sampling event on one CPU and its ring.
pub struct Sampler {
    fd: OwnedFd,
    ring: Ring,
    pub source: Source,
    /// The rate asked for (Hz).
    pub hz: u64,
    /// The time between samples: cpu-clock's period (see
    /// [`clock_period_ns`]), or the mean at `hz` for cycles.
    pub period_ns: u64,
    layout: Layout,
    /// Bytes of user stack each sample copies (0: none, registers neither).
    pub stack_bytes: u32,
    /// Why samples carry no user registers and stack, when they do not
    /// (another architecture than x86-64, or the kernel refused them).
    pub no_stack_because: Option<String>,
    /// Why cpu-clock samples and not cycles, when so: the kernel's answer
    /// to the cycles event, in words.
    pub software_because: Option<String>,
}

/// A perf event's ring, mapped: a header page and a power of two of data
/// pages, read without blocking.
struct Ring {
    ptr: *mut u8,
    len: usize,
    page: usize,
    scratch: Vec<u8>,
    /// Records the kernel could not write (ring full).
    lost: u64,
}

// SAFETY: the ring is a private mapping owned by this value, read only
// through `&mut self`.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring of `fd` with `pages` data pages; `what` names the
    /// event in the error.
    fn map(fd: &OwnedFd, pages: usize, what: &str) -> Result<Ring, String> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = (pages.next_power_of_two().max(1) + 1) * page;
        // SAFETY: maps the event's ring (one header page + data pages) as
        // the kernel requires; checked for failure below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            let fix = if e.raw_os_error() == Some(libc::EPERM) {
                " (the rings of all CPUs exceed kernel.perf_event_mlock_kb and RLIMIT_MEMLOCK: raise either)"
            } else {
                ""
            };
            return Err(format!("cannot map the perf ring of {what}: {e}{fix}"));
        }
        Ok(Ring { ptr: ptr as *mut u8, len, page, scratch: Vec::with_capacity(4096), lost: 0 })
    }

    /// Hands every record the kernel wrote since the last call to `out`
    /// (its type, the header's misc bits, its body after the header),
    /// counting the lost ones.
    fn drain(&mut self, out: &mut impl FnMut(u32, u16, &[u8])) {
        let data_len = self.len - self.page;
        // SAFETY: the header page is mapped; data_head is written by the
        // kernel (read with acquire), data_tail by us (release), as
        // perf_event_open(2) prescribes.
        let (head_ptr, tail_ptr) = unsafe {
            (
                &*(self.ptr.add(1024) as *const std::sync::atomic::AtomicU64),
                &*(self.ptr.add(1032) as *const std::sync::atomic::AtomicU64),
            )
        };
        let head = head_ptr.load(std::sync::atomic::Ordering::Acquire);
        let mut tail = tail_ptr.load(std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the data area follows the header page, data_len bytes.
        let data = unsafe { std::slice::from_raw_parts(self.ptr.add(self.page), data_len) };
        while tail + 8 <= head {
            let at = (tail % data_len as u64) as usize;
            let mut hdr = [0u8; 8];
            copy_wrapped(data, at, &mut hdr);
            let size = u16::from_le_bytes([hdr[6], hdr[7]]) as usize;
            if size < 8 || tail + size as u64 > head {
                break;
            }
            self.scratch.resize(size, 0);
            copy_wrapped(data, at, &mut self.scratch);
            let kind = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            if kind == RECORD_LOST && size >= 24 {
                self.lost += u64::from_le_bytes(self.scratch[16..24].try_into().unwrap_or_default());
            } else {
                out(kind, u16::from_le_bytes([hdr[4], hdr[5]]), &self.scratch[8..]);
            }
            tail += size as u64;
        }
        tail_ptr.store(tail, std::sync::atomic::Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

impl Attr {
    /// A counting event on the tracepoint of tracefs id `id`: no sampling,
    /// enabled from its opening, user and kernel. It states the first
    /// published size, all such an event needs (the kernel reads the size
    /// it is given).
    pub fn tracepoint(id: u64) -> Attr {
        Attr { kind: PERF_TYPE_TRACEPOINT, size: ATTR_SIZE_VER0, config: id, ..Default::default() }
    }
}

/// What a sampler samples: every task on a CPU, or one thread wherever it
/// runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Cpu(usize),
    Thread(i32),
}

impl Target {
    /// `(pid, cpu)` as perf_event_open(2) takes them.
    fn ids(self) -> (i32, i32) {
        match self {
            Target::Cpu(c) => (-1, c as i32),
            Target::Thread(t) => (t, -1),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Cpu(c) => write!(f, "CPU {c}"),
            Target::Thread(t) => write!(f, "thread {t}"),
        }
    }
}

/// Opens the event `attr` on `cpu`, every task on it (pid -1), closed on exec.
pub fn open(attr: &Attr, cpu: usize) -> std::io::Result<OwnedFd> {
    open_on(attr, Target::Cpu(cpu))
}

/// Opens the event `attr` on `target`, closed on exec.
fn open_on(attr: &Attr, target: Target) -> std::io::Result<OwnedFd> {
    let (pid, cpu) = target.ids();
    // SAFETY: attr is a valid, initialised perf_event_attr of the size it
    // states; pid -1 with a cpu counts or samples every task on that CPU,
    // a tid with cpu -1 that thread on any CPU.
    let fd =
        unsafe { libc::syscall(libc::SYS_perf_event_open, attr as *const Attr, pid, cpu, -1i32, PERF_FLAG_FD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor the kernel just gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The fix for an event the kernel refused for want of a privilege, as
/// words to append to its error; empty for any other refusal.
fn privilege_fix(e: &std::io::Error) -> &'static str {
    if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
        " (needs root or CAP_PERFMON; kernel.perf_event_paranoid)"
    } else {
        ""
    }
}

/// cpu-clock's period at about `hz`: a prime number of nanoseconds some
/// 0.4 % under 1/`hz`. A timer period is fixed, so one that divides a
/// probe's (2 kHz against a 1 ms probe) keeps the same phase to it for the
/// whole run: the sampling interrupt lands on every wake-up of the probe,
/// adding its cost to each, or on none. This one sweeps across a round
/// period's phases within a few hundred of its periods.
pub fn clock_period_ns(hz: u64) -> u64 {
    let is_prime = |n: u64| n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| !n.is_multiple_of(d));
    let mut p = 1_000_000_000 / hz.max(1) * 996 / 1000;
    while p > 2 && !is_prime(p) {
        p -= 1;
    }
    p.max(1)
}

/// The user registers and stack copy of `attr`, `stack` bytes of it, where
/// the architecture's registers are known (x86-64); elsewhere none, and
/// why.
fn with_user_stack(attr: Attr, stack: u32) -> Result<Attr, String> {
    #[cfg(target_arch = "x86_64")]
    {
        Ok(Attr {
            sample_type: attr.sample_type | SAMPLE_REGS_USER | SAMPLE_STACK_USER,
            sample_regs_user: REGS_USER,
            sample_stack_user: stack,
            ..attr
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (attr, stack);
        Err(format!(
            "user stacks are walked by frame pointers alone on {} (the registers of an unwind with the \
             programs' own tables are only set up for x86-64)",
            std::env::consts::ARCH
        ))
    }
}

impl Sampler {
    /// Opens a sampler on `cpu` at `hz` samples per second: hardware cycles
    /// when there is a PMU, else cpu-clock; on x86-64 each sample with the
    /// user registers and [`stack_bytes`] of user stack, where the kernel
    /// takes them (else without, and the sampler says why). `ring_pages`:
    /// data pages, a power of two.
    pub fn open(cpu: usize, hz: u64, ring_pages: usize) -> Result<Sampler, String> {
        Sampler::open_on(Target::Cpu(cpu), hz, ring_pages)
    }

    /// [`Sampler::open`] bound to thread `tid` wherever it runs (its samples
    /// only while it runs).
    pub fn open_thread(tid: i32, hz: u64, ring_pages: usize) -> Result<Sampler, String> {
        Sampler::open_on(Target::Thread(tid), hz, ring_pages)
    }

    fn open_on(cpu: Target, hz: u64, ring_pages: usize) -> Result<Sampler, String> {
        let hz = hz.clamp(1, 100_000);
        let plain = Attr {
            size: std::mem::size_of::<Attr>() as u32,
            sample_type: SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CALLCHAIN,
            flags: FLAG_DISABLED | FLAG_USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            sample_max_stack: MAX_FRAMES as u16,
            ..Default::default()
        };
        let stack = stack_bytes(hz);
        match with_user_stack(plain, stack) {
            Ok(base) => match Sampler::open_with(cpu, hz, ring_pages, base) {
                Ok(mut s) => {
                    s.stack_bytes = stack;
                    Ok(s)
                }
                // A kernel without user stack dumps: the frame-pointer walk alone.
                Err(with) => {
                    let mut s = Sampler::open_with(cpu, hz, ring_pages, plain)?;
                    s.no_stack_because = Some(format!(
                        "the kernel refused the user registers and stack with each sample ({with}): user stacks are \
                         walked by frame pointers alone"
                    ));
                    Ok(s)
                }
            },
            Err(why) => {
                let mut s = Sampler::open_with(cpu, hz, ring_pages, plain)?;
                s.no_stack_because = Some(why);
                Ok(s)
            }
        }
    }

    /// [`Sampler::open`] with `base` (its sample type, registers and stack).
    fn open_with(cpu: Target, hz: u64, ring_pages: usize, base: Attr) -> Result<Sampler, String> {
        let clock_period = clock_period_ns(hz);
        let mut hw = Attr {
            kind: PERF_TYPE_HARDWARE,
            config: PERF_COUNT_HW_CPU_CYCLES,
            sample_period_or_freq: hz,
            flags: base.flags | FLAG_FREQ,
            ..base
        };
        #[cfg(target_arch = "x86_64")]
        {
            hw.sample_type |= SAMPLE_REGS_INTR;
            hw.sample_regs_intr = REG_X86_FLAGS;
        }
        let regs_intr = hw.sample_type & SAMPLE_REGS_INTR != 0;
        // Cycles with the flags register, else cycles alone (a PMU whose
        // driver refuses the interrupt registers), else cpu-clock.
        let plain = Attr { sample_type: hw.sample_type & !SAMPLE_REGS_INTR, sample_regs_intr: 0, ..hw };
        let hardware =
            open_on(&hw, cpu).map(|fd| (fd, regs_intr)).or_else(|_| open_on(&plain, cpu).map(|fd| (fd, false)));
        let mut software_because = None;
        let (fd, source, regs_intr) = match hardware {
            Ok((fd, regs_intr)) => (fd, Source::Cycles, regs_intr),
            Err(refused) => {
                software_because = Some(why_not_cycles(&refused, hz));
                let sw = Attr {
                    kind: PERF_TYPE_SOFTWARE,
                    config: PERF_COUNT_SW_CPU_CLOCK,
                    sample_period_or_freq: clock_period,
                    ..base
                };
                let fd = open_on(&sw, cpu)
                    .map_err(|e| format!("perf_event_open (cpu-clock on {cpu}) failed: {e}{}", privilege_fix(&e)))?;
                (fd, Source::CpuClock, false)
            }
        };
        let ring = Ring::map(&fd, ring_pages, &cpu.to_string())?;
        let layout = Layout {
            regs_user: base.sample_type & SAMPLE_REGS_USER != 0,
            stack_user: base.sample_type & SAMPLE_STACK_USER != 0,
            regs_intr,
        };
        Ok(Sampler {
            fd,
            ring,
            source,
            hz,
            period_ns: if source == Source::CpuClock { clock_period } else { 1_000_000_000 / hz },
            layout,
            stack_bytes: 0,
            no_stack_because: None,
            software_because,
        })
    }

    pub fn enable(&self, on: bool) -> Result<(), String> {
        // SAFETY: ioctl on our own perf descriptor, no argument.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), if on { IOC_ENABLE } else { IOC_DISABLE }, 0) };
        if r < 0 { Err(format!("perf ioctl: {}", std::io::Error::last_os_error())) } else { Ok(()) }
    }

    /// Reads every sample the kernel wrote since the last call.
    pub fn drain(&mut self, out: &mut impl FnMut(PerfSample)) {
        let layout = self.layout;
        self.ring.drain(&mut |kind, _, body| {
            if kind == RECORD_SAMPLE
                && let Some(s) = parse_sample(body, layout)
            {
                out(s);
            }
        });
    }

    /// Samples the kernel could not write (ring full).
    pub fn lost(&self) -> u64 {
        self.ring.lost
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        let _ = self.enable(false);
    }
}

/// A side-band record of [`MapWatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapEvent {
    /// Process `.0` ran `exec`: its old mappings are gone.
    Exec(i32),
    /// A new process, with its parent's mappings (a thread is no new
    /// process, and is not told).
    Fork {
        parent: i32,
        child: i32,
    },
    /// The kernel lost records (a ring full): what was built from them
    /// may miss some.
    Lost,
    Mmap(Mmap2),
}

/// The kernel's side-band records of the processes that fork, map
/// executable memory or run `exec` on one CPU (a dummy software event: it samples
/// nothing), written as they happen: a process that lived a few
/// milliseconds still has its mappings told, where reading its
/// `/proc/PID/maps` comes too late.
pub struct MapWatch {
    _fd: OwnedFd,
    ring: Ring,
}

impl MapWatch {
    pub fn open(cpu: usize, pages: usize) -> Result<MapWatch, String> {
        let attr = Attr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<Attr>() as u32,
            config: PERF_COUNT_SW_DUMMY,
            // Each record ends with its CLOCK_MONOTONIC time, to put the
            // CPUs' records in one order (a process that moved between
            // its exec and its libraries).
            sample_type: SAMPLE_TIME,
            flags: FLAG_MMAP
                | FLAG_MMAP2
                | FLAG_COMM
                | FLAG_COMM_EXEC
                | FLAG_TASK
                | FLAG_SAMPLE_ID_ALL
                | FLAG_USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            ..Default::default()
        };
        let fd = open(&attr, cpu)
            .map_err(|e| format!("perf_event_open (mapping records, CPU {cpu}) failed: {e}{}", privilege_fix(&e)))?;
        let ring = Ring::map(&fd, pages, &format!("the mapping records of CPU {cpu}"))?;
        Ok(MapWatch { _fd: fd, ring })
    }

    /// Records the kernel could not write (ring full).
    pub fn lost(&self) -> u64 {
        self.ring.lost
    }

    /// Hands over every exec and executable mapping recorded since the
    /// last call, each with its time (CLOCK_MONOTONIC ns).
    pub fn drain(&mut self, out: &mut impl FnMut(u64, MapEvent)) {
        self.ring.drain(&mut |kind, misc, body| {
            let t = body.len().checked_sub(8).and_then(|at| u64_at(body, at)).unwrap_or(0);
            match kind {
                RECORD_MMAP2 => {
                    if let Some(m) = parse_mmap2(body, misc) {
                        out(t, MapEvent::Mmap(m));
                    }
                }
                RECORD_FORK => {
                    if let (Some(child), Some(parent)) = (u32_at(body, 0), u32_at(body, 4))
                        && child != parent
                    {
                        out(t, MapEvent::Fork { parent: parent as i32, child: child as i32 });
                    }
                }
                RECORD_COMM if misc & MISC_COMM_EXEC != 0 => {
                    if let Some(pid) = u32_at(body, 0) {
                        out(t, MapEvent::Exec(pid as i32));
                    }
                }
                _ => {}
            }
        });
    }
}

fn copy_wrapped(data: &[u8], at: usize, out: &mut [u8]) {
    let first = out.len().min(data.len() - at);
    out[..first].copy_from_slice(&data[at..at + first]);
    let rest = out.len() - first;
    out[first..].copy_from_slice(&data[..rest]);
}

/// `kernel.perf_event_max_sample_rate`: the most samples a second that
/// frequency-mode events may ask for.
fn max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate").ok()?.trim().parse().ok()
}

/// Why the hardware cycles event was not opened, from the kernel's answer
/// `e` at `hz` samples per second, with the fix where there is one.
fn why_not_cycles(e: &std::io::Error, hz: u64) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENODEV) => {
            format!("no hardware PMU here ({e}), so no NMI sampling (a VM needs its PMU passed through)")
        }
        Some(libc::EOPNOTSUPP) => {
            format!("the PMU here cannot sample ({e}: no overflow interrupt), so no NMI sampling")
        }
        Some(libc::EACCES | libc::EPERM) => {
            format!("the cycles event was refused ({e}): kernel.perf_event_paranoid, or CAP_PERFMON")
        }
        Some(libc::EINVAL) => match max_sample_rate() {
            Some(max) if hz > max => format!(
                "the cycles event was refused ({e}): --sample-hz {hz} is above kernel.perf_event_max_sample_rate \
                 {max}; lower it, or raise the sysctl"
            ),
            _ => format!("the cycles event was refused ({e})"),
        },
        Some(libc::EBUSY) => format!("the PMU is busy ({e}): another profiler holds its counters"),
        _ => format!("the cycles event was refused ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cpu-clock's period is prime, just under 1/hz, and sweeps across
    /// the phases of round probe periods: no bin of a twentieth of the
    /// probe's period is missed within 2,000 samples.
    #[test]
    fn the_clock_period_does_not_lock_to_a_probes() {
        for hz in [100, 997, 1000, 2000, 4000, 10_000] {
            let p = clock_period_ns(hz);
            let nominal = 1_000_000_000 / hz;
            assert!(p < nominal && p * 1000 >= nominal * 995, "{hz} Hz: {p}");
            assert!((2..).take_while(|d| d * d <= p).all(|d| !p.is_multiple_of(d)), "{p} is prime");
            for interval in [100_000u64, 250_000, 500_000, 1_000_000, 2_000_000, 10_000_000] {
                let bins: std::collections::BTreeSet<u64> =
                    (0..2000u64).map(|n| (n * p) % interval * 20 / interval).collect();
                assert_eq!(bins.len(), 20, "{hz} Hz ({p} ns) against {interval} ns: phases {bins:?}");
            }
        }
    }

    fn record(ip: u64, chain: &[u64], regs: Option<u64>) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(ip.to_le_bytes());
        b.extend(42u32.to_le_bytes());
        b.extend(43u32.to_le_bytes());
        b.extend(1_000u64.to_le_bytes());
        b.extend((chain.len() as u64).to_le_bytes());
        for a in chain {
            b.extend(a.to_le_bytes());
        }
        if let Some(flags) = regs {
            b.extend(2u64.to_le_bytes());
            b.extend(flags.to_le_bytes());
        }
        b
    }

    #[test]
    fn the_refusal_of_cycles_says_why_and_the_fix() {
        let err = |n| std::io::Error::from_raw_os_error(n);
        assert!(why_not_cycles(&err(libc::ENOENT), 2000).starts_with("no hardware PMU here"));
        assert!(why_not_cycles(&err(libc::EACCES), 2000).contains("perf_event_paranoid"));
        assert!(why_not_cycles(&err(libc::EBUSY), 2000).contains("busy"));
        // Far above any kernel's sample rate limit, when the sysctl is there.
        let w = why_not_cycles(&err(libc::EINVAL), u64::MAX);
        if max_sample_rate().is_some() {
            assert!(w.contains("--sample-hz") && w.contains("perf_event_max_sample_rate"), "{w}");
        } else {
            assert!(w.starts_with("the cycles event was refused"), "{w}");
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(REG_X86_FLAGS, 0x200, "the flags register is bit 9 of the mask (after AX..SP and IP)");
    }

    #[test]
    fn samples_split_into_kernel_and_user_chains() {
        let k = 0xffff_ffff_8100_0010u64;
        let chain = [CONTEXT_KERNEL, k, k + 8, CONTEXT_USER, 0x5555_0000_1000, 0x5555_0000_2000];
        let s = parse_sample(&record(k, &chain, None), Layout::default()).unwrap();
        assert_eq!((s.t_ns, s.pid, s.tid), (1_000, 42, 43));
        assert_eq!(s.kernel, [k, k + 8]);
        assert_eq!(s.user, [0x5555_0000_1000, 0x5555_0000_2000]);
        assert_eq!(s.irqs_off, None);
        // No chain: the IP alone, in its own space.
        let s = parse_sample(&record(0x4000, &[], None), Layout::default()).unwrap();
        assert_eq!((s.kernel.len(), s.user.as_slice()), (0, &[0x4000][..]));
        // The flags register says whether interrupts were on.
        let intr = Layout { regs_intr: true, ..Default::default() };
        let s = parse_sample(&record(k, &[CONTEXT_KERNEL, k], Some(0x46)), intr).unwrap();
        assert_eq!(s.irqs_off, Some(true));
        let s = parse_sample(&record(k, &[CONTEXT_KERNEL, k], Some(0x246)), intr).unwrap();
        assert_eq!(s.irqs_off, Some(false));
        assert!(parse_sample(&record(k, &chain, None)[..30], Layout::default()).is_none());
    }

    /// The user registers (BP, SP, IP) and the stack copy, of which the
    /// kernel copied `copied` bytes; a kernel thread's have neither.
    #[test]
    fn samples_carry_the_user_registers_and_stack() {
        let both = Layout { regs_user: true, stack_user: true, regs_intr: true };
        let mut b = record(0x5555_0000_1000, &[CONTEXT_USER, 0x5555_0000_1000], None);
        for v in [2u64, 0x7ffd_0000_0100, 0x7ffd_0000_0000, 0x5555_0000_1000] {
            b.extend(v.to_le_bytes());
        }
        b.extend(32u64.to_le_bytes());
        b.extend((0..32u8).collect::<Vec<u8>>());
        b.extend(24u64.to_le_bytes());
        b.extend([2u64, 0x246].iter().flat_map(|v| v.to_le_bytes()));
        let s = parse_sample(&b, both).unwrap();
        let st = s.stack.as_deref().unwrap();
        assert_eq!((st.bp, st.sp, st.ip), (0x7ffd_0000_0100, 0x7ffd_0000_0000, 0x5555_0000_1000));
        assert_eq!(st.bytes, (0..24u8).collect::<Vec<u8>>(), "only the bytes the kernel copied");
        assert_eq!(s.irqs_off, Some(false), "the interrupted registers after the stack");
        // A kernel thread: no registers (ABI none), an empty stack.
        let k = 0xffff_ffff_8100_0010u64;
        let mut b = record(k, &[CONTEXT_KERNEL, k], None);
        b.extend(0u64.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend([2u64, 0x46].iter().flat_map(|v| v.to_le_bytes()));
        let s = parse_sample(&b, both).unwrap();
        assert_eq!((s.stack.is_none(), s.irqs_off), (true, Some(true)));
        // Cut inside the stack.
        let mut b = record(k, &[], None);
        b.extend([2u64, 1, 2, 3, 64].iter().flat_map(|v| v.to_le_bytes()));
        assert!(parse_sample(&b, both).is_none());
    }

    /// 8 KiB of stack at 2 kHz; less above, within the byte budget; the
    /// ring holds some 125 ms of samples, within its bounds.
    #[test]
    fn the_stack_copy_and_ring_fit_the_rate() {
        assert_eq!(stack_bytes(2000), STACK_MAX);
        assert_eq!(stack_bytes(100), STACK_MAX);
        assert_eq!(stack_bytes(10_000), 1536);
        assert_eq!(stack_bytes(100_000), STACK_MIN);
        assert_eq!(ring_pages(2000, STACK_MAX), 512);
        assert_eq!(ring_pages(100, STACK_MAX), 64);
        assert!(ring_pages(1000, STACK_MAX) * 4096 >= 1000 * (STACK_MAX as usize + 1200) / 8);
    }

    fn mmap2_record(prot: u32, path: &str) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [77u32, 78] {
            b.extend(v.to_le_bytes());
        }
        for v in [0x7f00_0000_1000u64, 0x5000, 0x2000] {
            b.extend(v.to_le_bytes());
        }
        for v in [0xfeu32, 1] {
            b.extend(v.to_le_bytes());
        }
        b.extend(4242u64.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(prot.to_le_bytes());
        b.extend(2u32.to_le_bytes());
        b.extend(path.as_bytes());
        b.resize(b.len().next_multiple_of(8) + 8, 0);
        b
    }

    #[test]
    fn mapping_records_give_executable_mappings() {
        let m = parse_mmap2(&mmap2_record(5, "/usr/lib/x86_64-linux-gnu/libc.so.6"), 0).unwrap();
        assert_eq!(
            m,
            Mmap2 {
                pid: 77,
                start: 0x7f00_0000_1000,
                len: 0x5000,
                pgoff: 0x2000,
                maj: 0xfe,
                min: 1,
                ino: 4242,
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into()
            }
        );
        assert_eq!(parse_mmap2(&mmap2_record(3, "/data"), 0), None, "not executable");
        assert_eq!(parse_mmap2(&mmap2_record(5, "/x"), MISC_MMAP_BUILD_ID), None, "a build ID, not an inode");
        assert_eq!(parse_mmap2(&mmap2_record(5, "/x")[..40], 0), None, "cut short");
    }

    /// Root only: a process that exits at once has its exec and its
    /// executable mappings told, with the inode its file has.
    #[test]
    fn mapping_records_tell_a_short_lived_process() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let mut watches: Vec<MapWatch> =
            match crate::sys::cpu::online().iter().map(|&c| MapWatch::open(c, 16)).collect() {
                Ok(w) => w,
                Err(e) => return eprintln!("skipped: {e}"),
            };
        // A shell that runs exec: the same pid, a second exec.
        let mut child = std::process::Command::new("sh").arg("-c").arg("exec /usr/bin/true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        let t1 = crate::sys::clock::now();
        let mut got = Vec::new();
        for w in &mut watches {
            w.drain(&mut |t, e| got.push((t, e)));
        }
        assert!(got.iter().all(|&(t, _)| t > 0 && t <= t1), "CLOCK_MONOTONIC times: {got:#?}");
        let got: Vec<MapEvent> = got.into_iter().map(|x| x.1).collect();
        assert!(got.contains(&MapEvent::Exec(pid)), "the exec of {pid}: {got:#?}");
        let me = std::process::id() as i32;
        assert!(got.contains(&MapEvent::Fork { parent: me, child: pid }), "the fork of {pid}: {got:#?}");
        let true_path = std::fs::canonicalize("/usr/bin/true").unwrap();
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&true_path).unwrap());
        let mapped = got.iter().any(|e| matches!(e, MapEvent::Mmap(m) if m.pid == pid && m.ino == ino && m.len > 0));
        assert!(mapped, "true's code mapped by {pid} (inode {ino}): {got:#?}");
        assert_eq!(watches.iter().map(MapWatch::lost).sum::<u64>(), 0);
    }

    #[test]
    fn the_ring_wraps() {
        let data = [1u8, 2, 3, 4, 5, 6];
        let mut out = [0u8; 4];
        copy_wrapped(&data, 4, &mut out);
        assert_eq!(out, [5, 6, 1, 2]);
    }

    /// Root only: a sampler opens on this machine (cpu-clock where there
    /// is no PMU) and its samples carry CLOCK_MONOTONIC times.
    #[test]
    fn samples_this_cpu() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let _machine = crate::machine_lock();
        let cpu = 0;
        let mut s = match Sampler::open(cpu, 5_000, 16) {
            Ok(s) => s,
            Err(e) => return eprintln!("skipped: {e}"),
        };
        crate::sys::cpu::pin_self(&[cpu]).unwrap();
        let t0 = crate::sys::clock::now();
        s.enable(true).unwrap();
        while crate::sys::clock::now() < t0 + 20_000_000 {
            std::hint::spin_loop();
        }
        s.enable(false).unwrap();
        let t1 = crate::sys::clock::now();
        let mut got = Vec::new();
        s.drain(&mut |x| got.push(x));
        assert!(got.len() >= 10, "{} samples in 20 ms at 5 kHz ({:?})", got.len(), s.source);
        assert!(got.iter().all(|x| x.t_ns >= t0 && x.t_ns <= t1), "CLOCK_MONOTONIC times");
        assert!(got.iter().any(|x| !x.user.is_empty() || !x.kernel.is_empty()));
    }
}
