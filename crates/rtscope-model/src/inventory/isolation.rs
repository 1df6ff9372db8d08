//! Isolated CPUs: which measured CPUs the kernel keeps apart (`isolcpus=`,
//! `nohz_full=`, `rcu_nocbs=`), and what still interrupted them during a
//! run, from `/proc/interrupts` read before and after it. On an isolated
//! CPU that is the advice: what still disturbs it, not to isolate it.

use super::{Inventory, TOPIC_ISOLATION, Warning, format_cpu_list, parse_cpu_list};

/// `/proc/interrupts` at an instant: its CPU columns and, per source, the
/// count on each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interrupts {
    /// The CPU of each column (the header's `CPUn`; offline CPUs have none).
    pub cpus: Vec<usize>,
    pub rows: Vec<IrqRow>,
}

/// One line of `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqRow {
    /// `24` for a device's IRQ line, `LOC`, `RES`, ... for the others.
    pub id: String,
    /// The device's name (the line's last field) for a numbered IRQ, the
    /// description (`Local timer interrupts`) for the others.
    pub name: String,
    /// One count per column of [`Interrupts::cpus`].
    pub counts: Vec<u64>,
}

impl IrqRow {
    /// A device's interrupt line (numbered), not a per-CPU vector.
    pub fn is_device(&self) -> bool {
        !self.id.is_empty() && self.id.chars().all(|c| c.is_ascii_digit())
    }
}

/// Parses `/proc/interrupts`. `ERR` and `MIS` (one total each) are left out.
pub fn parse_interrupts_table(text: &str) -> Interrupts {
    let mut lines = text.lines();
    let cpus: Vec<usize> = lines
        .next()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|c| c.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .collect();
    let mut rows = Vec::new();
    for line in lines {
        let Some((id, rest)) = line.split_once(':') else { continue };
        let id = id.trim();
        if id == "ERR" || id == "MIS" {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let mut counts: Vec<u64> = fields.iter().take(cpus.len()).map_while(|f| f.parse().ok()).collect();
        let desc = &fields[counts.len()..];
        // A short line counts nothing on the CPUs it leaves out.
        counts.resize(cpus.len(), 0);
        let name = if id.chars().all(|c| c.is_ascii_digit()) {
            desc.last().copied().unwrap_or("?").to_string()
        } else {
            desc.join(" ")
        };
        rows.push(IrqRow { id: id.to_string(), name, counts });
    }
    Interrupts { cpus, rows }
}

/// What interrupted one CPU between two readings of `/proc/interrupts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Took {
    pub cpu: usize,
    /// Device interrupts, per line: (`24 virtio0-input.0`, count), most first.
    pub device: Vec<(String, u64)>,
    /// Local timer interrupts (`LOC`): the scheduler tick and every timer
    /// that expired on the CPU, a probe's own included.
    pub timer: u64,
    /// The other per-CPU interrupts (`RES`, `CAL`, `TLB`, `IWI`, ...), most first.
    pub other: Vec<(String, u64)>,
}

impl Took {
    pub fn device_total(&self) -> u64 {
        self.device.iter().map(|d| d.1).sum()
    }
}

/// What interrupted `cpu` from `before` to `after`; None where `cpu` has
/// no column in either.
pub fn took(before: &Interrupts, after: &Interrupts, cpu: usize) -> Option<Took> {
    let col = |t: &Interrupts| t.cpus.iter().position(|&c| c == cpu);
    let (b, a) = (col(before)?, col(after)?);
    let mut out = Took { cpu, ..Took::default() };
    for row in &after.rows {
        let was = before.rows.iter().find(|r| r.id == row.id).map_or(0, |r| r.counts[b]);
        let n = row.counts[a].saturating_sub(was);
        if n == 0 {
            continue;
        }
        if row.is_device() {
            out.device.push((format!("{} {}", row.id, row.name), n));
        } else if row.id == "LOC" {
            out.timer = n;
        } else {
            out.other.push((row.id.clone(), n));
        }
    }
    out.device.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    out.other.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    Some(out)
}

impl Inventory {
    /// CPUs whose RCU callbacks are offloaded: `rcu_nocbs=` on the command
    /// line (given without a list: every online CPU).
    pub fn rcu_nocbs_cpus(&self) -> Vec<usize> {
        match self.rcu_nocbs.as_deref().map(str::trim) {
            None => Vec::new(),
            Some("") => self.online_cpus(),
            Some(list) => parse_cpu_list(list).unwrap_or_default(),
        }
    }

    /// How the kernel keeps `cpu` apart: `isolcpus (domain,managed_irq)`,
    /// `nohz_full`, `rcu_nocbs`; empty where it does not.
    pub fn isolation_of(&self, cpu: usize) -> Vec<String> {
        let mut out = Vec::new();
        if self.isolated_cpus().contains(&cpu) {
            let flags: Vec<&str> = self
                .isolcpus
                .as_deref()
                .unwrap_or("")
                .split(',')
                .take_while(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_alphabetic() || c == '_'))
                .collect();
            out.push(if flags.is_empty() { "isolcpus".into() } else { format!("isolcpus ({})", flags.join(",")) });
        }
        if self.nohz_full_cpus().contains(&cpu) {
            out.push("nohz_full".into());
        }
        if self.rcu_nocbs_cpus().contains(&cpu) {
            out.push("rcu_nocbs".into());
        }
        out
    }

    /// The measured CPUs that are isolated, each with how: "1 (isolcpus
    /// (domain,managed_irq), nohz_full, rcu_nocbs)"; None where none is.
    pub fn isolated_measured(&self, measured: &[usize]) -> Option<String> {
        let list: Vec<String> = measured
            .iter()
            .filter_map(|&c| {
                let how = self.isolation_of(c);
                (!how.is_empty()).then(|| format!("{c} ({})", how.join(", ")))
            })
            .collect();
        (!list.is_empty()).then(|| list.join("; "))
    }
}

/// Timer interrupts per second beyond rtscope's own on a nohz_full CPU
/// above which its tick is said to run: a stopped tick still fires about
/// once a second, and other programs' timers now and then.
pub const NOHZ_TICKS_PER_S: f64 = 10.0;

/// The run's notes on its isolated measured CPUs (what interrupted each
/// during the run, over `seconds`), and the warning that replaces the
/// advice to isolate them: what still disturbs them, with the fix. CPUs
/// that are not isolated have the isolation note of [`Inventory::warnings`].
/// `own(cpu)`: the timer interrupts rtscope itself caused there (its
/// probes' timed wake-ups, a kernel tracer's timer beside them), told
/// apart from the rest of the local timer interrupts: the tick and other
/// programs' timers.
pub fn isolation_after(
    inv: &Inventory,
    measured: &[usize],
    (before, after): (&Interrupts, &Interrupts),
    seconds: f64,
    own: &dyn Fn(usize) -> u64,
) -> (Vec<String>, Option<Warning>) {
    let mut notes = Vec::new();
    let mut still: Vec<String> = Vec::new();
    let mut fixes: Vec<String> = Vec::new();
    let mut irqs: Vec<String> = Vec::new();
    let isolated: Vec<usize> = measured.iter().copied().filter(|&c| !inv.isolation_of(c).is_empty()).collect();
    let housekeeping: Vec<usize> = inv.online_cpus().into_iter().filter(|c| !isolated.contains(c)).collect();
    for &cpu in &isolated {
        let how = inv.isolation_of(cpu);
        let Some(t) = took(before, after, cpu) else { continue };
        let rate = |n: u64| if seconds > 0.0 { format!(", {:.0}/s", n as f64 / seconds) } else { String::new() };
        let list = |v: &[(String, u64)]| v.iter().take(4).map(|(n, k)| format!("{n}: {k}")).collect::<Vec<_>>();
        let device = match t.device_total() {
            0 => "no device interrupt".to_string(),
            n => format!("{n} device interrupts ({})", list(&t.device).join(", ")),
        };
        let other: u64 = t.other.iter().map(|o| o.1).sum();
        // rtscope's own timers may expire here or, where the kernel
        // queues them on a housekeeping CPU (timer migration, from a
        // nohz_full CPU), there: what is beyond them here is a floor.
        let mine = own(cpu);
        let beyond = t.timer.saturating_sub(mine);
        let timers = if beyond > 0 {
            format!(
                "{} local timer interrupts, at least {beyond} of them beyond rtscope's own {mine} timed wake-ups there \
                 (the tick and other timers{})",
                t.timer,
                rate(beyond)
            )
        } else {
            format!(
                "{} local timer interrupts, no more than rtscope's own {mine} timed wake-ups there (the kernel can \
                 expire those timers on a housekeeping CPU and wake this one with a rescheduling IPI)",
                t.timer
            )
        };
        notes.push(format!(
            "CPU {cpu} is isolated ({}); during the run it took {device}, {timers} and {other} other interrupts{}",
            how.join(", "),
            if t.other.is_empty() { String::new() } else { format!(" ({})", list(&t.other).join(", ")) }
        ));
        let per_s = if seconds > 0.0 { beyond as f64 / seconds } else { 0.0 };
        if how.iter().any(|h| h == "nohz_full") && per_s > NOHZ_TICKS_PER_S {
            still.push(format!(
                "CPU {cpu} is nohz_full yet took at least {per_s:.0} timer interrupts/s beyond rtscope's own: its \
                 tick kept running (another task runnable there), or another program's timers expire there"
            ));
            fixes.push(format!(
                "find what else runs on CPU {cpu} (ps -eLo psr,pid,comm | awk '$1 == {cpu}') and the timers queued \
                 there (/proc/timer_list)"
            ));
        }
        if t.device_total() > 0 {
            still.push(format!("CPU {cpu} took {device}"));
            irqs.extend(t.device.iter().filter_map(|(n, _)| n.split_whitespace().next().map(String::from)));
        }
        if !how.iter().any(|h| h == "nohz_full") {
            still.push(format!("CPU {cpu} is not nohz_full: the scheduler tick still interrupts it"));
            fixes.push(format!("add nohz_full={cpu} to the kernel command line"));
        }
        if !how.iter().any(|h| h == "rcu_nocbs") {
            still.push(format!("CPU {cpu} is not rcu_nocbs: RCU callbacks still run on it"));
            fixes.push(format!("add rcu_nocbs={cpu} to the kernel command line"));
        }
    }
    if !irqs.is_empty() {
        irqs.sort_unstable();
        irqs.dedup();
        let home = if housekeeping.is_empty() { "0".to_string() } else { format_cpu_list(&housekeeping) };
        fixes.insert(
            0,
            format!(
                "move those IRQs to the housekeeping CPUs (for N in {}: echo {home} > /proc/irq/$N/smp_affinity_list), \
                 and boot with irqaffinity={home} and isolcpus=managed_irq,... for the ones that come back",
                irqs.join(" ")
            ),
        );
    }
    let warning = (!still.is_empty()).then(|| Warning {
        topic: TOPIC_ISOLATION.into(),
        message: format!("isolated, yet still disturbed during the run: {}", still.join("; ")),
        fix: fixes.join("; "),
    });
    (notes, warning)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "           CPU0       CPU1       \n\
  24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
  36:          0      47658 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
 NMI:          0          0   Non-maskable interrupts\n\
 LOC:      97632      88404   Local timer interrupts\n\
 RES:      22919      29612   Rescheduling interrupts\n\
 ERR:          0\n";

    const AFTER: &str = "           CPU0       CPU1       \n\
  24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
  36:          0      47670 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
  40:          0          3 PCI-MSIX-0000:00:04.0   0-edge      virtio3-config\n\
 NMI:          0          0   Non-maskable interrupts\n\
 LOC:      99632      90410   Local timer interrupts\n\
 RES:      22919      29614   Rescheduling interrupts\n\
 ERR:          0\n";

    #[test]
    fn interrupts_per_cpu_between_two_readings() {
        let (b, a) = (parse_interrupts_table(BEFORE), parse_interrupts_table(AFTER));
        assert_eq!(a.cpus, vec![0, 1]);
        assert_eq!(a.rows.iter().find(|r| r.id == "36").unwrap().name, "virtio1-req.0");
        let t = took(&b, &a, 1).unwrap();
        assert_eq!(t.device, vec![("36 virtio1-req.0".to_string(), 12), ("40 virtio3-config".to_string(), 3)]);
        assert_eq!((t.timer, t.other.clone()), (2006, vec![("RES".to_string(), 2)]));
        let t0 = took(&b, &a, 0).unwrap();
        assert_eq!((t0.device_total(), t0.timer), (0, 2000));
        assert_eq!(took(&b, &a, 5), None);
        // Offline CPUs have no column: the header names the others.
        let sparse = parse_interrupts_table("     CPU0  CPU2\n LOC:  5  7  Local timer interrupts\n");
        assert_eq!(sparse.cpus, vec![0, 2]);
    }

    fn isolated_inv() -> Inventory {
        Inventory {
            cpus_online: "0-1".into(),
            isolcpus: Some("domain,managed_irq,1".into()),
            isolated_sysfs: Some("1".into()),
            nohz_full: Some("1".into()),
            nohz_full_sysfs: Some("1".into()),
            rcu_nocbs: Some("1".into()),
            ..Inventory::default()
        }
    }

    #[test]
    fn a_cpu_is_isolated_by_each_parameter() {
        let inv = isolated_inv();
        assert_eq!(inv.isolation_of(1), vec!["isolcpus (domain,managed_irq)", "nohz_full", "rcu_nocbs"]);
        assert!(inv.isolation_of(0).is_empty());
        assert_eq!(
            inv.isolated_measured(&[0, 1]).as_deref(),
            Some("1 (isolcpus (domain,managed_irq), nohz_full, rcu_nocbs)")
        );
        assert_eq!(inv.isolated_measured(&[0]), None);
        let bare = Inventory { cpus_online: "0-3".into(), rcu_nocbs: Some(String::new()), ..Inventory::default() };
        assert_eq!(bare.rcu_nocbs_cpus(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn an_isolated_cpu_is_told_what_still_disturbs_it() {
        let inv = isolated_inv();
        let (b, a) = (parse_interrupts_table(BEFORE), parse_interrupts_table(AFTER));
        let none = |_| 0;
        let (notes, w) = isolation_after(&inv, &[1], (&b, &a), 2.0, &|c| if c == 1 { 1990 } else { 0 });
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with("CPU 1 is isolated (isolcpus (domain,managed_irq), nohz_full, rcu_nocbs)"));
        assert!(notes[0].contains("15 device interrupts (36 virtio1-req.0: 12, 40 virtio3-config: 3)"), "{}", notes[0]);
        assert!(
            notes[0].contains(
                "2006 local timer interrupts, at least 16 of them beyond rtscope's own 1990 timed wake-ups there (the \
                 tick and other timers, 8/s)"
            ),
            "{}",
            notes[0]
        );
        let w = w.expect("what still disturbs it");
        assert_eq!(w.topic, TOPIC_ISOLATION);
        assert!(w.message.contains("CPU 1 took 15 device interrupts"), "{}", w.message);
        assert!(w.fix.contains("for N in 36 40: echo 0 > /proc/irq/$N/smp_affinity_list"), "{}", w.fix);
        assert!(!w.fix.contains("isolcpus=domain,managed_irq,1 "), "no advice to isolate it: {}", w.fix);
        // Quiet: a note, no warning.
        let (notes, w) = isolation_after(&inv, &[1], (&b, &b), 2.0, &none);
        assert!(notes[0].contains("took no device interrupt"), "{}", notes[0]);
        assert!(notes[0].contains("0 local timer interrupts, no more than rtscope's own 0 timed"), "{}", notes[0]);
        assert_eq!(w, None);
        // Timer interrupts beyond rtscope's own at 1003/s on a nohz_full
        // CPU: its tick ran.
        let quiet_dev =
            Interrupts { rows: a.rows.iter().filter(|r| !r.is_device()).cloned().collect(), cpus: a.cpus.clone() };
        let (notes, w) = isolation_after(&inv, &[1], (&b, &quiet_dev), 2.0, &none);
        assert!(
            notes[0].contains(
                "at least 2006 of them beyond rtscope's own 0 timed wake-ups there (the tick and other timers, 1003/s)"
            ),
            "{}",
            notes[0]
        );
        let w = w.expect("the tick ran");
        assert!(
            w.message.contains("CPU 1 is nohz_full yet took at least 1003 timer interrupts/s beyond rtscope's own"),
            "{}",
            w.message
        );
        assert!(w.fix.contains("ps -eLo psr,pid,comm") && w.fix.contains("/proc/timer_list"), "{}", w.fix);
        // A CPU that is not isolated has neither (the isolation note says it).
        let (notes, w) = isolation_after(&inv, &[0], (&b, &a), 2.0, &none);
        assert!(notes.is_empty() && w.is_none());
        // isolcpus alone: the tick and RCU callbacks still run there.
        let only = Inventory { nohz_full: None, nohz_full_sysfs: None, rcu_nocbs: None, ..isolated_inv() };
        let (_, w) = isolation_after(&only, &[1], (&b, &b), 2.0, &none);
        let w = w.unwrap();
        assert!(w.message.contains("not nohz_full") && w.message.contains("not rcu_nocbs"), "{}", w.message);
        assert!(w.fix.contains("nohz_full=1") && w.fix.contains("rcu_nocbs=1"), "{}", w.fix);
    }
}
