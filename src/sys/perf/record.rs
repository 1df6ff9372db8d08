//! The perf records rtscope reads, decoded: a sample (its time, task,
//! call chains, user registers and stack copy) and an executable mapping
//! (PERF_RECORD_MMAP2). Pure: bytes in, values out.

use super::{CONTEXT_KERNEL, CONTEXT_MAX, CONTEXT_USER, MAX_FRAMES, MISC_MMAP_BUILD_ID, X86_IF};

/// One sample: CLOCK_MONOTONIC time, task, and its chains innermost first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerfSample {
    pub t_ns: u64,
    pub pid: i32,
    pub tid: i32,
    pub kernel: Vec<u64>,
    /// The kernel's frame-pointer walk of the user stack: the first exact,
    /// the rest only where every frame keeps its frame pointer.
    pub user: Vec<u64>,
    /// Whether interrupts were off where the sample hit (only known for
    /// NMI samples with the flags register).
    pub irqs_off: Option<bool>,
    /// The task's user registers and stack top, where the sampler copies
    /// them and the task has a user side (not a kernel thread).
    pub stack: Option<Box<UserStack>>,
}

/// A task's user registers at a sample (the interrupted ones, or those of
/// its way into the kernel where it was in a system call) and the top of
/// its user stack, from the stack pointer up: what an unwinder with the
/// program's own tables needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserStack {
    pub ip: u64,
    pub sp: u64,
    /// The frame pointer register (any value where the code keeps none).
    pub bp: u64,
    /// The bytes the kernel could copy from `sp` up (fewer than asked at
    /// the stack's top end).
    pub bytes: Vec<u8>,
}

/// What a sample record holds after its call chain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// User registers (x86-64: BP, SP, IP).
    pub regs_user: bool,
    /// A copy of the user stack.
    pub stack_user: bool,
    /// The interrupted registers (x86's flags).
    pub regs_intr: bool,
}

/// A process mapped executable memory (a PERF_RECORD_MMAP2): `[start,
/// start + len)` shows `path` from `pgoff` on; device and inode as
/// `/proc/PID/maps` gives them (0 for memory that is no file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mmap2 {
    pub pid: i32,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub maj: u32,
    pub min: u32,
    pub ino: u64,
    pub path: String,
}

/// A PERF_RECORD_MMAP2 body (after the header) that maps executable
/// memory: pid, tid, addr, len, pgoff, maj, min, ino, ino_generation,
/// prot, flags, then the NUL-terminated path.
pub fn parse_mmap2(b: &[u8], misc: u16) -> Option<Mmap2> {
    let u32_at = |at| u32_at(b, at);
    if misc & MISC_MMAP_BUILD_ID != 0 || u32_at(56)? & libc::PROT_EXEC as u32 == 0 {
        return None;
    }
    let name = b.get(64..)?;
    let path = String::from_utf8_lossy(&name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())]).into_owned();
    Some(Mmap2 {
        pid: u32_at(0)? as i32,
        start: u64_at(b, 8)?,
        len: u64_at(b, 16)?,
        pgoff: u64_at(b, 24)?,
        maj: u32_at(32)?,
        min: u32_at(36)?,
        ino: u64_at(b, 40)?,
        path,
    })
}

/// Little-endian integers at `at` in a kernel record (or an ELF file's
/// headers), None past its end.
pub fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]]))
}

pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|s| u32::from_le_bytes(s.try_into().unwrap_or_default()))
}

pub fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).map(|s| u64::from_le_bytes(s.try_into().unwrap_or_default()))
}

/// A PERF_RECORD_SAMPLE body (after the 8-byte header) with IP, TID, TIME,
/// CALLCHAIN and what `layout` says: REGS_USER (BP, SP, IP), STACK_USER,
/// REGS_INTR with the flags register.
pub fn parse_sample(b: &[u8], layout: Layout) -> Option<PerfSample> {
    let ip = u64_at(b, 0)?;
    let pid = u32::from_le_bytes(b.get(8..12)?.try_into().ok()?) as i32;
    let tid = u32::from_le_bytes(b.get(12..16)?.try_into().ok()?) as i32;
    let t_ns = u64_at(b, 16)?;
    let nr = u64_at(b, 24)? as usize;
    let mut at = 32;
    let (mut kernel, mut user) = (Vec::new(), Vec::new());
    let mut ctx = if ip >= 0xffff_8000_0000_0000 { CONTEXT_KERNEL } else { CONTEXT_USER };
    for _ in 0..nr.min(512) {
        let a = u64_at(b, at)?;
        at += 8;
        if a >= CONTEXT_MAX {
            ctx = a;
            continue;
        }
        let chain = match ctx {
            CONTEXT_KERNEL => &mut kernel,
            CONTEXT_USER => &mut user,
            _ => continue,
        };
        if chain.len() < MAX_FRAMES {
            chain.push(a);
        }
    }
    if kernel.is_empty() && user.is_empty() {
        if ip >= 0xffff_8000_0000_0000 { kernel.push(ip) } else { user.push(ip) }
    }
    // The user registers: an ABI word, then BP, SP and IP unless it is
    // none (a kernel thread).
    let mut regs = None;
    if layout.regs_user {
        let abi = u64_at(b, at)?;
        at += 8;
        if abi != 0 {
            regs = Some((u64_at(b, at)?, u64_at(b, at + 8)?, u64_at(b, at + 16)?));
            at += 24;
        }
    }
    // The stack: its size asked (0: none, and nothing after it), the
    // bytes, then how many of them the kernel could copy.
    let mut stack = None;
    if layout.stack_user {
        let size = u64_at(b, at)? as usize;
        at += 8;
        if size > 0 {
            let bytes = b.get(at..at.checked_add(size)?)?;
            at += size;
            let copied = (u64_at(b, at)? as usize).min(size);
            at += 8;
            if let Some((bp, sp, ip)) = regs {
                stack = Some(Box::new(UserStack { ip, sp, bp, bytes: bytes[..copied].to_vec() }));
            }
        }
    }
    let irqs_off = if layout.regs_intr {
        let abi = u64_at(b, at)?;
        if abi != 0 { Some(u64_at(b, at + 8)? & X86_IF == 0) } else { None }
    } else {
        None
    };
    Some(PerfSample { t_ns, pid, tid, kernel, user, irqs_off, stack })
}
