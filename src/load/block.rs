//! `block:/dev/vdb` or `block:/path/file[:SIZE]`: reads and writes of
//! 64 KiB with O_DIRECT (past the page cache, so that each one is a request
//! the disk completes with an interrupt), at offsets spread over the first
//! SIZE (64M by default) of a named device or file. Its check counts the
//! interrupts of the disk's IRQ lines (a virtio-blk's `virtioN-req.0`, an
//! NVMe's queues).
//!
//! Never writes where data may be: a device that is mounted, used by swap
//! or another block device (LVM, RAID), or whose first 4 KiB hold anything
//! but zeros or this load's own mark, is refused; a file is created when it
//! does not exist (and removed at the end), and an existing one is used
//! only when it starts with the mark (left by an earlier block load that was
//! killed).

use super::{LoadCtx, LoadSpec, Running, Workload, devices};
use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::characterisation::Target;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub struct Block;

/// The first bytes of every block this load writes.
const MARK: &[u8] = b"rtscope block load: this data may be overwritten\n";
/// One I/O, bytes (a multiple of any logical block size).
const IO: usize = 64 << 10;
/// The span used when no size is given.
const DEFAULT_SIZE: u64 = 64 << 20;

/// `block:`'s argument, typed.
#[derive(Debug, PartialEq)]
pub struct BlockArg {
    pub path: PathBuf,
    /// Bytes used, from the start.
    pub size: u64,
}

/// `/dev/vdb`, `/var/tmp/f:256M`.
pub fn parse_arg(text: &str) -> Result<BlockArg, String> {
    let (path, size) = devices::split_setting(text, DEFAULT_SIZE, |s| {
        rtscope_model::units::parse_size(s)
            .map(|v| v as u64)
            .ok_or_else(|| format!("size '{s}' is not a size (e.g. 64M, 1G)"))
    })?;
    if !path.starts_with('/') {
        return Err(format!("'{path}' is not an absolute path (e.g. block:/dev/vdb or block:/var/tmp/blk:64M)"));
    }
    if size < 2 * IO as u64 {
        return Err(format!("size {size} is below {} (two I/Os of 64K)", 2 * IO));
    }
    Ok(BlockArg { path: PathBuf::from(path), size: size / IO as u64 * IO as u64 })
}

fn arg(spec: &LoadSpec) -> Result<BlockArg> {
    devices::arg(spec, parse_arg)
}

/// Why `dev` (a block device) may hold data, or None.
fn device_in_use(dev: &Path) -> Option<String> {
    let meta = std::fs::metadata(dev).ok()?;
    let sys = |rdev: u64| {
        std::fs::canonicalize(format!("/sys/dev/block/{}:{}", rustix::fs::major(rdev), rustix::fs::minor(rdev))).ok()
    };
    let mine = sys(meta.rdev())?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some((maj, min)) = f.get(2).and_then(|d| d.split_once(':')) else { continue };
        let Ok(theirs) = std::fs::canonicalize(format!("/sys/dev/block/{maj}:{min}")) else { continue };
        if theirs.starts_with(&mine) || mine.starts_with(&theirs) {
            return Some(format!("it is mounted (on {})", f.get(4).unwrap_or(&"?")));
        }
    }
    let name = mine.file_name()?.to_string_lossy().into_owned();
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    if swaps.lines().skip(1).any(|l| l.split_whitespace().next().is_some_and(|s| s.ends_with(&format!("/{name}")))) {
        return Some("it is used for swap".into());
    }
    if std::fs::read_dir(mine.join("holders")).is_ok_and(|mut d| d.next().is_some()) {
        return Some("another block device is built on it (LVM, RAID, a mapping)".into());
    }
    if std::fs::read_dir(&mine).is_ok_and(|d| d.flatten().any(|e| e.path().join("partition").exists())) {
        return Some("it has partitions".into());
    }
    None
}

/// Whether the first 4 KiB of `f` are zeros or start with [`MARK`].
fn free_to_write(f: &std::fs::File) -> std::io::Result<bool> {
    let mut head = vec![0u8; 4096];
    let n = f.read_at(&mut head, 0)?;
    Ok(head[..n].starts_with(MARK) || head[..n].iter().all(|b| *b == 0))
}

impl Workload for Block {
    fn name(&self) -> &'static str {
        "block"
    }
    fn about(&self) -> &'static str {
        "block:/dev/vdb or block:/path/file[:SIZE]; 64K reads and writes with O_DIRECT over its first SIZE (64M), \
         a device only when unmounted and empty, a file created and removed (checked: the disk's IRQ lines)"
    }
    fn intensity(&self) -> Option<super::Intensity> {
        None
    }
    fn takes_device(&self) -> bool {
        true
    }
    fn check(&self, spec: &LoadSpec) -> Result<()> {
        let a = arg(spec)?;
        let refuse = |why: String| {
            anyhow!(
                "load '{}': will not write to {}: {why}; name an unused device or a file that does not exist (e.g. \
                 block:/var/tmp/rtscope-blk:64M)",
                spec.label,
                a.path.display()
            )
        };
        match std::fs::metadata(&a.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let dir = a.path.parent().unwrap_or(Path::new("/"));
                if !dir.is_dir() {
                    bail!("load '{}': {} is not a directory", spec.label, dir.display());
                }
            }
            Err(e) => return Err(refuse(e.to_string())),
            Ok(m) if m.file_type().is_block_device() => {
                if let Some(why) = device_in_use(&a.path) {
                    return Err(refuse(why));
                }
                let f = std::fs::File::open(&a.path).with_context(|| format!("load '{}'", spec.label))?;
                if !free_to_write(&f)? {
                    return Err(refuse("its first 4 KiB hold data (not zeros, not this load's mark)".into()));
                }
                let bytes = device_size(&a.path);
                if bytes.is_some_and(|b| b < a.size) {
                    bail!(
                        "load '{}': {} is smaller than {} bytes: give a smaller size",
                        spec.label,
                        a.path.display(),
                        a.size
                    );
                }
            }
            Ok(m) if m.is_file() => {
                let f = std::fs::File::open(&a.path)?;
                if !free_to_write(&f)? {
                    return Err(refuse("the file exists and holds data".into()));
                }
            }
            Ok(_) => return Err(refuse("neither a block device nor a file".into())),
        }
        Ok(())
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        let a = arg(spec)?;
        let created = !a.path.exists();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(created)
            .custom_flags(libc::O_DIRECT)
            .open(&a.path)
            .with_context(|| {
                format!("opening {} with O_DIRECT (tmpfs has none: use a file on a disk)", a.path.display())
            })?;
        let path = a.path.clone();
        run.spawn("block", &spec.cpus, move |ctx| {
            if let Err(e) = io_loop(ctx, &file, a.size) {
                ctx.fail(format!("block: {}: {e}", path.display()));
            }
            drop(file);
            if created {
                let _ = std::fs::remove_file(&path);
            }
        })
    }
    /// The disk's interrupts moving: at least 10/s on its IRQ lines.
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        let a = arg(spec).ok()?;
        let on = if a.path.exists() { a.path.clone() } else { a.path.parent()?.to_path_buf() };
        let disk = devices::whole_disk_of(&on);
        let lines = disk.as_deref().map(devices::disk_lines).unwrap_or_default();
        let on_what = match &disk {
            Some(d) => format!("{d}'s {}", devices::describe(&lines)),
            None => format!("no disk found under {}", on.display()),
        };
        Some(devices::irq_target(spec, lines, &format!("its disk's interrupts moving ({on_what})")))
    }
}

/// A block device's size, bytes (/sys/class/block/NAME/size, in 512-byte
/// sectors).
fn device_size(dev: &Path) -> Option<u64> {
    let m = std::fs::metadata(dev).ok()?;
    let link = format!("/sys/dev/block/{}:{}/size", rustix::fs::major(m.rdev()), rustix::fs::minor(m.rdev()));
    std::fs::read_to_string(link).ok()?.trim().parse::<u64>().ok().map(|s| s * 512)
}

/// Fills the span once, then writes one block and reads another, at
/// offsets spread over it, until the load stops.
fn io_loop(ctx: &LoadCtx, f: &std::fs::File, size: u64) -> std::io::Result<()> {
    // O_DIRECT wants a buffer aligned to the logical block size (4K covers
    // every disk).
    let mut raw = vec![0u8; IO + 4096];
    let skew = raw.as_ptr().align_offset(4096);
    let buf = &mut raw[skew..skew + IO];
    buf[..MARK.len()].copy_from_slice(MARK);
    let blocks = size / IO as u64;
    for b in 0..blocks {
        if ctx.stopping() {
            return Ok(());
        }
        f.write_all_at(buf, b * IO as u64)?;
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while !ctx.stopping() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f.write_all_at(buf, (x % blocks) * IO as u64)?;
        f.read_exact_at(buf, ((x >> 20) % blocks) * IO as u64)?;
        buf[..MARK.len()].copy_from_slice(MARK);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_into_a_path_and_a_size() {
        assert_eq!(parse_arg("/dev/vdb").unwrap(), BlockArg { path: "/dev/vdb".into(), size: 64 << 20 });
        assert_eq!(parse_arg("/var/tmp/f:1G").unwrap().size, 1 << 30);
        assert!(parse_arg("vdb").unwrap_err().contains("absolute"));
        assert!(parse_arg("/f:lots").unwrap_err().contains("not a size"));
        assert!(parse_arg("/f:4K").unwrap_err().contains("below"));
    }
}
