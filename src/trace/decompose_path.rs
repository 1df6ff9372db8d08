//! A sample's wake-up path in the events before it: the timer's (its
//! interrupt, the hrtimer callback, the waking, the switch onto the
//! thread) or a received datagram's (NET_RX, the waking, the switch), and
//! the stages between its marks. The decomposer (`decompose.rs`) asks for
//! it per sample.

use super::*;

/// The wake-up path of a sample programmed at `p` and woken at `w` in `win`
/// (its events up to the wake-up), and its stages; none where the trace
/// does not follow the stages.
pub(super) fn wake_path(
    win: &[Ev],
    tid: i32,
    after: u64,
    settings: Settings,
    p: u64,
    w: u64,
) -> (Option<Chain>, Option<Stages>) {
    let net = settings.path == WakePath::NetRx;
    let chain = match (settings.stages, net) {
        (false, _) => None,
        (true, false) => find_chain(win, tid, p, after, settings),
        (true, true) => find_net_chain(win, tid, p, after),
    };
    // A waking on another CPU: the stages before it ran there, unseen.
    let stages = chain
        .filter(|c| c.remote.is_none())
        .map(|c| if net { net_stages_of(win, &c, p, w) } else { stages_of(win, &c, p, w) });
    (chain, stages)
}

/// Finds the wake-up path of a sample programmed at `p` in `win` (the
/// events up to its wake-up), among events after `after` (the previous
/// wake-up) and not earlier than `p` (less a small tolerance).
pub(super) fn find_chain(win: &[Ev], tid: i32, p: u64, after: u64, settings: Settings) -> Option<Chain> {
    let floor = p.saturating_sub(EARLY_NS).max(after.saturating_add(1));
    let valid = |i: usize| win[i].ts >= floor;
    let (s, k, inferred) = switch_and_waking(win, tid, floor)?;
    if matches!(win[k].kind, Kind::RemoteWaking { .. }) {
        return None;
    }
    let x = win[..k].iter().rposition(|e| matches!(e.kind, Kind::ExpireEntry { .. })).filter(|&i| valid(i))?;
    let irq = if settings.timer_entry {
        let i = win[..x].iter().rposition(|e| matches!(e.kind, Kind::TimerEntry | Kind::TimerExit))?;
        (win[i].kind == Kind::TimerEntry && valid(i)).then_some(i)
    } else {
        None
    };
    if settings.timer_entry && irq.is_none() {
        return None;
    }
    Some(Chain { irq, expire: x, waking: k, switch_in: s, inferred, end: None, remote: None })
}

/// The switch-in of `tid` at or before the end of `win`, its waking before
/// it, or (no switch traced) the waking and the last event after it that
/// ends an interrupt; both not before `floor`.
pub(super) fn switch_and_waking(win: &[Ev], tid: i32, floor: u64) -> Option<(usize, usize, bool)> {
    let valid = |i: usize| win[i].ts >= floor;
    let switch =
        win.iter().rposition(|e| matches!(e.kind, Kind::Switch { next, .. } if next == tid)).filter(|&i| valid(i));
    let waking = |end: usize| {
        win[..end]
            .iter()
            .rposition(|e| matches!(e.kind, Kind::Waking { pid } | Kind::RemoteWaking { pid, .. } if pid == tid))
            .filter(|&i| valid(i))
    };
    match switch {
        Some(s) => Some((s, waking(s)?, false)),
        None => {
            let k = waking(win.len())?;
            let exit = win[k..].iter().rposition(|e| {
                matches!(
                    e.kind,
                    Kind::TimerExit
                        | Kind::IrqExit(_)
                        | Kind::SoftExit(_)
                        | Kind::VectorExit(_)
                        | Kind::ExpireExit { .. }
                )
            });
            Some((exit.map_or(k, |i| k + i), k, true))
        }
    }
}

/// The NET_RX softirq vector.
const NET_RX: u8 = 3;

/// Finds a received datagram's path to the thread `tid` (stamped by the
/// kernel at `p`): the switch-in, the waking, and the NET_RX softirq that
/// ran the waking (its entry may precede `p`: a softirq already running
/// when the datagram was stamped, as in a NIC's NAPI poll). Where the
/// waking was recorded on another CPU (the softirq ran there), the chain
/// has no softirq and says which CPU; None when no waking was seen.
pub(super) fn find_net_chain(win: &[Ev], tid: i32, p: u64, after: u64) -> Option<Chain> {
    let floor = p.saturating_sub(EARLY_NS).max(after.saturating_add(1));
    let (s, k, inferred) = switch_and_waking(win, tid, floor)?;
    if let Kind::RemoteWaking { cpu, .. } = win[k].kind {
        return Some(Chain { irq: None, expire: k, waking: k, switch_in: s, inferred, end: None, remote: Some(cpu) });
    }
    let mut depth = 0u32;
    let mut entry = None;
    for i in (0..k).rev() {
        match win[i].kind {
            Kind::SoftExit(NET_RX) => depth += 1,
            Kind::SoftEntry(NET_RX) if depth == 0 => {
                entry = Some(i);
                break;
            }
            Kind::SoftEntry(NET_RX) => depth -= 1,
            // A switch happens in task context: no softirq encloses what
            // comes after it.
            Kind::Switch { .. } => break,
            _ => {}
        }
    }
    let e = entry.filter(|&i| win[i].ts > after)?;
    let end = win[k..=s.max(k)].iter().position(|e| e.kind == Kind::SoftExit(NET_RX)).map(|i| k + i);
    Some(Chain { irq: None, expire: e, waking: k, switch_in: s, inferred, end, remote: None })
}

/// A datagram's stages: queue, stack, softirq, thread, user; each mark
/// clamped to the one before, so they add up to `w - p`.
pub(super) fn net_stages_of(win: &[Ev], c: &Chain, p: u64, w: u64) -> Stages {
    let m1 = win[c.expire].ts.max(p);
    let m2 = win[c.waking].ts.max(m1);
    let m3 = c.end.map_or(m2, |x| win[x].ts).max(m2);
    let m4 = win[c.switch_in].ts.max(m3);
    let m5 = w.max(m4);
    Stages { irq_ns: m1 - p, handler_ns: m2 - m1, wake_ns: m3 - m2, thread_ns: m4 - m3, user_ns: m5 - m4 }
}

/// Each mark is clamped to the one before, so the stages add up to `w - p`.
pub(super) fn stages_of(win: &[Ev], c: &Chain, p: u64, w: u64) -> Stages {
    let m1 = win[c.irq.unwrap_or(c.expire)].ts.max(p);
    let m2 = win[c.expire].ts.max(m1);
    let m3 = win[c.waking].ts.max(m2);
    let m4 = win[c.switch_in].ts.max(m3);
    let m5 = w.max(m4);
    Stages { irq_ns: m1 - p, handler_ns: m2 - m1, wake_ns: m3 - m2, thread_ns: m4 - m3, user_ns: m5 - m4 }
}
