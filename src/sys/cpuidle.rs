//! A CPU's cpuidle states and how often it entered each
//! (`/sys/devices/system/cpu/cpuN/cpuidle/stateK/{name,latency,usage}`):
//! what waking that CPU from idle can cost. Counters, not trace events, so
//! reading them adds nothing to the measured wake-ups.

use std::path::Path;

/// One idle state: its name, the exit latency its driver declares (us) and
/// the times the CPU entered it (since boot, or within a span once
/// [`entered`] has taken the difference).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdleState {
    pub name: String,
    pub exit_us: u64,
    pub usage: u64,
}

/// The idle states of `cpu` on this machine; empty without a cpuidle
/// driver (the kernel's default idle, `HLT` on x86) or without sysfs.
pub fn states(cpu: usize) -> Vec<IdleState> {
    states_under(Path::new("/"), cpu)
}

/// [`states`] read under `root` (`/` for the real machine).
pub fn states_under(root: &Path, cpu: usize) -> Vec<IdleState> {
    let dir = root.join(format!("sys/devices/system/cpu/cpu{cpu}/cpuidle"));
    let read = |k: usize, f: &str| std::fs::read_to_string(dir.join(format!("state{k}/{f}"))).ok();
    let number = |k: usize, f: &str| read(k, f).and_then(|s| s.trim().parse::<u64>().ok());
    (0..)
        .map_while(|k| {
            let name = read(k, "name")?.trim().to_string();
            Some(IdleState { name, exit_us: number(k, "latency").unwrap_or(0), usage: number(k, "usage").unwrap_or(0) })
        })
        .collect()
}

/// Whether the kernel's idle loop polls on every CPU, bypassing cpuidle
/// (`idle=poll` on its command line, a common real-time setting): an idle
/// CPU then never halts, and its cpuidle counters (if it has a driver)
/// stay still. Read once.
pub fn polls_in_idle() -> bool {
    static POLLS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *POLLS.get_or_init(|| {
        let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
        polls_on(&cmdline)
    })
}

/// [`polls_in_idle`] for a command line.
fn polls_on(cmdline: &str) -> bool {
    rtscope_model::inventory::cmdline_param(cmdline, "idle").as_deref() == Some("poll")
}

/// The states entered between two readings of one CPU, with the entries in
/// between; those not entered are left out.
pub fn entered(before: &[IdleState], after: &[IdleState]) -> Vec<IdleState> {
    after
        .iter()
        .map(|a| {
            let was = before.iter().find(|b| b.name == a.name).map_or(0, |b| b.usage);
            IdleState { usage: a.usage.saturating_sub(was), ..a.clone() }
        })
        .filter(|s| s.usage > 0)
        .collect()
}

/// `POLL 9120 times (exit 0 us), C6 31 times (exit 133 us)`, deepest last;
/// `None` when nothing was entered.
pub fn describe(entered: &[IdleState]) -> Option<String> {
    let mut by_depth: Vec<&IdleState> = entered.iter().collect();
    by_depth.sort_by_key(|s| s.exit_us);
    let parts: Vec<String> =
        by_depth.iter().map(|s| format!("{} {} times (exit {} us)", s.name, s.usage, s.exit_us)).collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, k: usize, name: &str, latency: u64, usage: u64) {
        let d = root.join(format!("sys/devices/system/cpu/cpu3/cpuidle/state{k}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("name"), format!("{name}\n")).unwrap();
        std::fs::write(d.join("latency"), format!("{latency}\n")).unwrap();
        std::fs::write(d.join("usage"), format!("{usage}\n")).unwrap();
    }

    #[test]
    fn the_states_entered_in_a_span_are_named_shallow_first() {
        let root = std::env::temp_dir().join(format!("rtscope-cpuidle-{}", std::process::id()));
        put(&root, 0, "POLL", 0, 100);
        put(&root, 1, "C1", 2, 50);
        put(&root, 2, "C6", 133, 7);
        let before = states_under(&root, 3);
        assert_eq!(before.len(), 3);
        assert_eq!(before[2], IdleState { name: "C6".into(), exit_us: 133, usage: 7 });
        put(&root, 0, "POLL", 0, 130);
        put(&root, 2, "C6", 133, 9);
        let span = entered(&before, &states_under(&root, 3));
        assert_eq!(describe(&span).as_deref(), Some("POLL 30 times (exit 0 us), C6 2 times (exit 133 us)"));
        assert_eq!(describe(&entered(&span, &span)), None, "nothing entered between equal readings");
        assert!(states_under(&root, 4).is_empty(), "a CPU without cpuidle has no states");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn idle_poll_is_read_from_the_command_line() {
        assert!(polls_on("BOOT_IMAGE=/vmlinuz root=/dev/sda1 idle=poll isolcpus=1"));
        assert!(!polls_on("BOOT_IMAGE=/vmlinuz idle=halt"));
        assert!(!polls_on("quiet"));
        assert!(!polls_on("quiet -- idle=poll"), "after -- it is init's");
    }

    #[test]
    fn this_machines_states_are_all_read() {
        let dir = Path::new("/sys/devices/system/cpu/cpu0/cpuidle");
        let listed = std::fs::read_dir(dir)
            .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("state")).count())
            .unwrap_or(0);
        let read = states(0);
        assert_eq!(read.len(), listed, "{read:?}");
        assert!(read.iter().all(|s| !s.name.is_empty()), "{read:?}");
    }
}
