//! The machine's clocks, caches and devices, as the inventory records them.

use super::format_cpu_list;
use serde::{Deserialize, Serialize};

/// One clock's resolution and read cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClockSource {
    /// `CLOCK_MONOTONIC`, ..., or the CPU's counter (`rdtsc`, `cntvct_el0`).
    pub name: String,
    /// What the kernel states (clock_getres), ns; for the CPU's counter,
    /// one tick at its calibrated rate.
    pub resolution_ns: f64,
    /// The smallest step seen between two consecutive reads, ns (None: it
    /// never moved while read).
    pub step_ns: Option<f64>,
    /// The mean cost of one read, ns (the cheapest of 20 batches of 1000).
    pub read_ns: f64,
}

impl ClockSource {
    /// `MONOTONIC 1ns, step 28ns, 24.1ns/read`.
    pub fn describe(&self) -> String {
        let ns = |v: f64| {
            if v >= 1e6 {
                format!("{:.3}ms", v / 1e6)
            } else if v >= 10.0 {
                format!("{v:.0}ns")
            } else {
                format!("{v:.2}ns")
            }
        };
        format!(
            "{} {}, step {}, {}/read",
            self.name.trim_start_matches("CLOCK_"),
            ns(self.resolution_ns),
            self.step_ns.map_or("none seen".into(), ns),
            ns(self.read_ns)
        )
    }
}

/// One CPU cache.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cache {
    /// 1, 2, 3.
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    /// As sysfs gives it (`32K`, `1024K`).
    pub size: String,
    /// The CPUs sharing it, kernel list syntax.
    pub shared_cpus: String,
}

impl Cache {
    /// `L1d 32K`, `L2 1024K`: the name a cache goes by.
    pub fn name(&self) -> String {
        let suffix = match self.kind.as_str() {
            "Data" => "d",
            "Instruction" => "i",
            _ => "",
        };
        format!("L{}{suffix} {}", self.level, self.size)
    }
}

/// A device that can interrupt: a NIC, a block device or a GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Device {
    /// `net`, `block` or `gpu`.
    pub class: String,
    /// `eth0`, `vda`, `card0`.
    pub name: String,
    /// The bound driver (`virtio_net`, `nvme`, `i915`); None when unbound.
    pub driver: Option<String>,
    /// The bus address of the device (`0000:00:03.0`, `virtio1`).
    pub bus_id: String,
    /// Its interrupt lines: the legacy IRQ and every MSI vector.
    pub irqs: Vec<u32>,
}

impl Device {
    /// `eth0 (virtio_net, 0000:00:03.0, IRQs 24-26)`.
    pub fn describe(&self) -> String {
        let irqs = match self.irqs.as_slice() {
            [] => "no IRQ".to_string(),
            [one] => format!("IRQ {one}"),
            many => {
                let list: Vec<usize> = many.iter().map(|&i| i as usize).collect();
                format!("IRQs {}", format_cpu_list(&list))
            }
        };
        format!("{} ({}, {}, {irqs})", self.name, self.driver.as_deref().unwrap_or("no driver"), self.bus_id)
    }
}
