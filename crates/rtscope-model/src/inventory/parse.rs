//! The kernel's strings: CPU lists, the command line's parameters, the
//! preemption model, capability masks.

use super::MAX_CPU;

/// Parse a kernel CPU list: `0`, `0-3`, `0,2-3`, `0-15:2/4` (the first 2 of
/// every group of 4). Whitespace around the list is ignored; an empty list
/// gives an empty vector. The result is sorted and deduplicated.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let list = s.trim();
    let mut cpus = Vec::new();
    if list.is_empty() {
        return Ok(cpus);
    }
    let num = |t: &str| -> Result<usize, String> {
        let t = t.trim();
        let n: usize = t.parse().map_err(|_| format!("invalid CPU list {list:?}: {t:?} is not a CPU number"))?;
        if n > MAX_CPU {
            return Err(format!("invalid CPU list {list:?}: CPU {n} is above the limit {MAX_CPU}"));
        }
        Ok(n)
    };
    for token in list.split(',') {
        let token = token.trim();
        if token.is_empty() {
            return Err(format!("invalid CPU list {list:?}: empty entry"));
        }
        let (range, group) = match token.split_once(':') {
            Some((r, g)) => (r, Some(g)),
            None => (token, None),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(range)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(format!("invalid CPU list {list:?}: range {lo}-{hi} is reversed"));
        }
        let (used, size) = match group {
            None => (1, 1),
            Some(g) => {
                let (u, z) = g
                    .split_once('/')
                    .ok_or_else(|| format!("invalid CPU list {list:?}: group {g:?} is not used/size"))?;
                let (u, z) = (num(u)?, num(z)?);
                if u == 0 || z == 0 || u > z {
                    return Err(format!("invalid CPU list {list:?}: group {g:?} needs 0 < used <= size"));
                }
                (u, z)
            }
        };
        cpus.extend((lo..=hi).filter(|c| (c - lo) % size < used));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Inverse of [`parse_cpu_list`]: `[0, 1, 2, 3, 5, 8, 9]` → `"0-3,5,8-9"`.
/// Input need not be sorted; duplicates are ignored.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

/// CPUs of an `isolcpus=` value, skipping its leading flags
/// (`isolcpus=nohz,domain,managed_irq,2-3` → `[2, 3]`).
pub fn isolcpus_cpus(value: &str) -> Result<Vec<usize>, String> {
    let mut rest = value.trim();
    loop {
        let (head, tail) = rest.split_once(',').unwrap_or((rest, ""));
        if !head.is_empty() && head.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
            rest = tail;
        } else {
            break;
        }
    }
    parse_cpu_list(rest)
}

/// Value of `key=` on a kernel command line; `Some("")` when the key is given
/// without a value, None when absent. Like the kernel, `-` and `_` are the
/// same in key names, double-quoted values may hold spaces, the last
/// occurrence wins, and everything after a bare `--` belongs to init.
pub fn cmdline_param(cmdline: &str, key: &str) -> Option<String> {
    let norm = |s: &str| s.replace('-', "_");
    let want = norm(key);
    let mut found = None;
    for arg in split_cmdline(cmdline) {
        if arg == "--" {
            break;
        }
        let (k, v) = match arg.split_once('=') {
            Some((k, v)) => (k, v),
            None => (arg.as_str(), ""),
        };
        if norm(k) == want {
            found = Some(v.replace('"', ""));
        }
    }
    found
}

/// Split a command line on whitespace outside double quotes.
fn split_cmdline(cmdline: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in cmdline.chars() {
        if c == '"' {
            quoted = !quoted;
            cur.push(c);
        } else if c.is_whitespace() && !quoted {
            if !cur.is_empty() {
                args.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        args.push(cur);
    }
    args
}

/// Preemption model from `/sys/kernel/realtime` (content, if the file
/// exists), `uname -v` and `/sys/kernel/debug/sched/preempt` (content, if
/// readable, e.g. `none voluntary (full) lazy`; a bare mode word such as
/// `full` is accepted too).
///
/// Returns "PREEMPT_RT", "PREEMPT_DYNAMIC(<mode>)", "PREEMPT_DYNAMIC" (mode
/// unknown), "PREEMPT", "PREEMPT_LAZY" or "unknown" (no PREEMPT token: NONE or
/// VOLUNTARY, which only the kernel config tells; see
/// [`preempt_model_from_kconfig`]).
pub fn preempt_model(realtime: Option<&str>, uname_v: &str, debug_preempt: Option<&str>) -> String {
    if realtime.map(str::trim) == Some("1") {
        return "PREEMPT_RT".to_string();
    }
    let has = |t: &str| uname_v.split_whitespace().any(|w| w == t);
    if has("PREEMPT_RT") {
        "PREEMPT_RT".to_string()
    } else if has("PREEMPT_DYNAMIC") {
        match debug_preempt.and_then(preempt_mode_word) {
            Some(mode) => format!("PREEMPT_DYNAMIC({mode})"),
            None => "PREEMPT_DYNAMIC".to_string(),
        }
    } else if has("PREEMPT_LAZY") {
        "PREEMPT_LAZY".to_string()
    } else if has("PREEMPT") {
        "PREEMPT".to_string()
    } else {
        "unknown".to_string()
    }
}

/// The current mode in `none voluntary (full) lazy`, or a bare word.
fn preempt_mode_word(s: &str) -> Option<&str> {
    let s = s.trim();
    if let (Some(a), Some(b)) = (s.find('('), s.find(')'))
        && a < b
    {
        let w = s[a + 1..b].trim();
        return (!w.is_empty()).then_some(w);
    }
    let mut words = s.split_whitespace();
    match (words.next(), words.next()) {
        (Some(w), None) if w.chars().all(|c| c.is_ascii_alphabetic()) => Some(w),
        _ => None,
    }
}

/// Preemption model from a kernel `.config` (`/boot/config-$(uname -r)`):
/// "PREEMPT_RT", "PREEMPT_DYNAMIC(<default mode>)", "PREEMPT_LAZY", "PREEMPT",
/// "VOLUNTARY" or "NONE"; None if the config says nothing about it.
/// For PREEMPT_DYNAMIC the mode is the boot default, which `preempt=` on the
/// cmdline or debugfs may have changed.
pub fn preempt_model_from_kconfig(kconfig: &str) -> Option<String> {
    let on = |opt: &str| kconfig.lines().any(|l| l.trim().strip_prefix(opt).is_some_and(|r| r == "=y"));
    let base = if on("CONFIG_PREEMPT_LAZY") {
        "lazy"
    } else if on("CONFIG_PREEMPT") {
        "full"
    } else if on("CONFIG_PREEMPT_VOLUNTARY") {
        "voluntary"
    } else if on("CONFIG_PREEMPT_NONE") {
        "none"
    } else {
        ""
    };
    if on("CONFIG_PREEMPT_RT") {
        Some("PREEMPT_RT".to_string())
    } else if on("CONFIG_PREEMPT_DYNAMIC") {
        Some(if base.is_empty() { "PREEMPT_DYNAMIC".to_string() } else { format!("PREEMPT_DYNAMIC({base})") })
    } else {
        match base {
            "lazy" => Some("PREEMPT_LAZY".to_string()),
            "full" => Some("PREEMPT".to_string()),
            "voluntary" => Some("VOLUNTARY".to_string()),
            "none" => Some("NONE".to_string()),
            _ => None,
        }
    }
}

/// Whether capability `bit` is in the `CapEff:` mask of a
/// `/proc/<pid>/status` text. False when the line is missing or malformed.
pub fn cap_eff_has(status: &str, bit: u32) -> bool {
    if bit >= 64 {
        return false;
    }
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << bit) != 0)
}
