//! The IRQ lines of the device a load drives, as /proc/interrupts names
//! them: found from sysfs (a PCI device's `msi_irqs`, a device's `irq`,
//! a serial port's `/sys/class/tty/NAME/irq`) and from the names in
//! /proc/interrupts (`ttyS1`, `eth0-TxRx-0`). Each line is an IRQ number
//! or a source's name ([`rtscope_model::characterisation::Target::devices`]).

use super::LoadSpec;
use rtscope_model::characterisation::{Measure, Target};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A device load is flagged below this many interrupts per second on its
/// device's lines: a line the load drives takes hundreds (a UART with a
/// 16-byte FIFO at 9600 baud, about 60); 10 is "did not move".
pub const MIN_IRQ_RATE: f64 = 10.0;

/// A device load's argument (`/dev/ttyS1:9600`), typed by `parse`, its
/// error naming the load.
pub fn arg<T>(spec: &LoadSpec, parse: fn(&str) -> Result<T, String>) -> anyhow::Result<T> {
    parse(spec.arg.as_deref().unwrap_or("")).map_err(|e| anyhow::anyhow!("load '{}': {e}", spec.label))
}

/// `PATH[:SETTING]` split at its last `:`, the setting typed by `parse`
/// or `default` when there is none.
pub fn split_setting<T>(
    text: &str,
    default: T,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<(&str, T), String> {
    match text.rsplit_once(':') {
        Some((path, setting)) => Ok((path, parse(setting)?)),
        None => Ok((text, default)),
    }
}

/// The target of a device load: [`MIN_IRQ_RATE`] on `lines`, `what`
/// saying which device (the limit is added).
pub fn irq_target(spec: &LoadSpec, lines: Vec<String>, what: &str) -> Target {
    Target {
        load: spec.label.clone(),
        cpus: spec.cpus.clone(),
        measure: Measure::DeviceInterrupts,
        asked: MIN_IRQ_RATE,
        limit: MIN_IRQ_RATE,
        asked_text: format!("{what}; flagged below {MIN_IRQ_RATE}/s"),
        devices: lines,
    }
}

/// The IRQ numbers of the device at `sysfs` (a `/sys/class/.../device`
/// link) or of the nearest device above it that has any: the PCI
/// function's MSI/MSI-X vectors (`msi_irqs/`), else its legacy `irq`.
pub fn sysfs_lines(sysfs: &Path) -> Vec<String> {
    let Ok(mut at) = std::fs::canonicalize(sysfs) else { return Vec::new() };
    loop {
        let mut lines: Vec<String> = std::fs::read_dir(at.join("msi_irqs"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        if lines.is_empty()
            && let Ok(irq) = std::fs::read_to_string(at.join("irq"))
            && irq.trim().parse::<u32>().is_ok_and(|n| n > 0)
        {
            lines.push(irq.trim().to_string());
        }
        if !lines.is_empty() {
            lines.sort_by_key(|l| l.parse::<u32>().unwrap_or(u32::MAX));
            return lines;
        }
        if !at.pop() || at == Path::new("/sys/devices") || at == Path::new("/sys") {
            return Vec::new();
        }
    }
}

/// The sources of /proc/interrupts whose name is `name` or starts with
/// `name-` (`eth0-TxRx-0`, `ttyS1`).
pub fn named_lines(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    rtscope_model::inventory::parse_interrupts_table(&text)
        .rows
        .into_iter()
        .filter(|r| r.name == name || r.name.strip_prefix(name).is_some_and(|rest| rest.starts_with('-')))
        .map(|r| r.id)
        .collect()
}

/// The lines of `a` and `b` in one list, each once.
pub fn merged(mut a: Vec<String>, b: Vec<String>) -> Vec<String> {
    for x in b {
        if !a.contains(&x) {
            a.push(x);
        }
    }
    a
}

/// A serial port's lines: its IRQ (`/sys/class/tty/NAME/irq`, 0 when it
/// has none) and its name, which /proc/interrupts shows while the port is
/// open.
pub fn tty_lines(name: &str) -> Vec<String> {
    let irq = std::fs::read_to_string(format!("/sys/class/tty/{name}/irq")).unwrap_or_default();
    let mut lines: Vec<String> =
        irq.trim().parse::<u32>().ok().filter(|n| *n > 0).map(|n| n.to_string()).into_iter().collect();
    lines.push(name.to_string());
    lines
}

/// A network interface's lines: its device's vectors, and the sources
/// named after it (drivers name their queues `IF-TxRx-N`).
pub fn net_lines(iface: &str) -> Vec<String> {
    merged(sysfs_lines(&PathBuf::from(format!("/sys/class/net/{iface}/device"))), named_lines(iface))
}

/// The whole disk under `path` (a block device, or a file on one):
/// `vda` for /dev/vda1 or a file on it. None when it is not on a block
/// device (tmpfs, overlay without a disk).
pub fn whole_disk_of(path: &Path) -> Option<String> {
    let m = std::fs::metadata(path).ok()?;
    let dev = if m.file_type().is_block_device() { m.rdev() } else { m.dev() };
    let link = format!("/sys/dev/block/{}:{}", rustix::fs::major(dev), rustix::fs::minor(dev));
    let at = std::fs::canonicalize(link).ok()?;
    let disk = if at.join("partition").exists() { at.parent()? } else { &at };
    Some(disk.file_name()?.to_string_lossy().into_owned())
}

/// A whole disk's lines: those of its device (a virtio-blk's queues, an
/// NVMe controller's vectors).
pub fn disk_lines(disk: &str) -> Vec<String> {
    sysfs_lines(&PathBuf::from(format!("/sys/block/{disk}/device")))
}

/// `36 virtio1-req.0, 35 virtio1-config`-like words for a message: each
/// line with its name in /proc/interrupts, or `none` when it has none.
pub fn describe(lines: &[String]) -> String {
    if lines.is_empty() {
        return "no IRQ line".into();
    }
    let text = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    let rows = rtscope_model::inventory::parse_interrupts_table(&text).rows;
    let named: Vec<String> = lines
        .iter()
        .map(|l| match rows.iter().find(|r| &r.id == l) {
            Some(r) if !r.name.is_empty() => format!("{l} {}", r.name),
            _ => l.clone(),
        })
        .collect();
    format!("IRQ {}", named.join(", "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_lines_of_this_machines_devices() {
        // The root file system's disk, where it is a disk with lines of its
        // own (a VM's virtio-blk, an NVMe); a container's overlay has none.
        match super::whole_disk_of(std::path::Path::new("/")) {
            Some(disk) => eprintln!("/ is on {disk}: {:?}", super::disk_lines(&disk)),
            None => eprintln!("skipped: / is on no block device"),
        }
        assert_eq!(super::tty_lines("ttyNONE"), vec!["ttyNONE".to_string()]);
        assert!(super::net_lines("lo").is_empty(), "loopback has no IRQ line");
        assert_eq!(super::merged(vec!["1".into()], vec!["1".into(), "x".into()]), vec!["1", "x"]);
    }
}
