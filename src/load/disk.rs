//! `disk`: write a file, fsync it, drop it from the page cache and read it
//! back, in the load's temporary directory, over and over (bounded size;
//! removed at the end).

use super::{Intensity, LoadCtx, LoadSpec, Running, Workload};
use anyhow::Result;
use rtscope_model::characterisation::{Measure, Target};
use std::io::{Read, Write};
use std::path::Path;

pub struct Disk;

impl Workload for Disk {
    fn name(&self) -> &'static str {
        "disk"
    }
    fn about(&self) -> &'static str {
        "write + fsync + read back a file in $TMPDIR (or /var/tmp), removed afterwards; intensity: MiB per file (64)"
    }
    fn intensity(&self) -> Option<Intensity> {
        Some(Intensity { unit: "MiB per file", min: 1, max: 4096, default: |_| 64 })
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        let dir = run.temp_dir()?;
        let mib = spec.intensity as usize;
        run.spawn("disk", &spec.cpus, move |ctx| {
            let file = dir.join("disk-load.bin");
            while !ctx.stopping() {
                if let Err(e) = cycle(ctx, &file, mib) {
                    ctx.error(format!("disk: {} : {e}", file.display()));
                    ctx.pause(std::time::Duration::from_secs(1));
                }
            }
            let _ = std::fs::remove_file(&file);
        })
    }
    /// Its file written and fsynced over and over: flagged when less than
    /// one write a second reaches a whole disk (its directory is in memory,
    /// a tmpfs, or on a device that is not counted).
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        Some(Target {
            load: spec.label.clone(),
            cpus: spec.cpus.clone(),
            measure: Measure::DiskWrites,
            asked: 1.0,
            limit: 1.0,
            asked_text: format!(
                "its file in {} written to a disk and fsynced, over and over (flagged below 1 write/s reaching a \
                 whole disk: a directory in memory, a tmpfs, writes to none; set TMPDIR)",
                super::temp_base().display()
            ),
            devices: Vec::new(),
        })
    }
}

/// One write, fsync, read-back cycle of `mib` MiB.
fn cycle(ctx: &LoadCtx, file: &Path, mib: usize) -> std::io::Result<()> {
    let chunk: Vec<u8> = (0..1 << 20).map(|i: usize| (i * 7) as u8).collect();
    let mut f = std::fs::File::create(file)?;
    for _ in 0..mib {
        if ctx.stopping() {
            return Ok(());
        }
        f.write_all(&chunk)?;
    }
    f.sync_all()?;
    // Out of the page cache, so that the read-back reaches the disk.
    let _ = rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed);
    drop(f);
    let mut f = std::fs::File::open(file)?;
    let mut back = vec![0u8; 1 << 20];
    let mut sum = 0u64;
    for _ in 0..mib {
        if ctx.stopping() {
            return Ok(());
        }
        f.read_exact(&mut back)?;
        sum = sum.wrapping_add(back[back.len() / 2] as u64);
    }
    std::hint::black_box(sum);
    std::fs::remove_file(file)
}
