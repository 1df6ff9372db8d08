//! Timers and the ways to sleep that the `sleep` and `ptimer` probes time:
//! timerfd, POSIX timers (`timer_create` with `SIGEV_SIGNAL` or
//! `SIGEV_THREAD_ID`) and their signals, relative sleeps through six APIs,
//! and the thread's timer slack. Small safe wrappers; nothing here allocates
//! after construction.

use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create, timerfd_settime,
};
use std::io;

fn ts(ns: u64) -> Timespec {
    Timespec { tv_sec: (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as _ }
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// A timerfd on CLOCK_MONOTONIC.
pub struct TimerFd(OwnedFd);

impl TimerFd {
    pub fn new() -> io::Result<TimerFd> {
        Ok(TimerFd(timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::CLOEXEC)?))
    }

    /// First expiry at CLOCK_MONOTONIC `first_ns`, then every `period_ns`.
    pub fn arm_periodic(&self, first_ns: u64, period_ns: u64) -> io::Result<()> {
        let spec = Itimerspec { it_interval: ts(period_ns), it_value: ts(first_ns) };
        timerfd_settime(&self.0, TimerfdTimerFlags::ABSTIME, &spec)?;
        Ok(())
    }

    /// One expiry `ns` from now (`ns` > 0).
    #[inline]
    pub fn arm_once(&self, ns: u64) -> io::Result<()> {
        let spec = Itimerspec { it_interval: ts(0), it_value: ts(ns.max(1)) };
        timerfd_settime(&self.0, TimerfdTimerFlags::empty(), &spec)?;
        Ok(())
    }

    /// Blocks until the timer has expired; returns the expirations since
    /// the last wait (more than 1: periods were missed).
    #[inline]
    pub fn wait(&self) -> io::Result<u64> {
        let mut buf = [0u8; 8];
        loop {
            match rustix::io::read(&self.0, &mut buf) {
                Ok(8) => return Ok(u64::from_ne_bytes(buf)),
                Ok(_) => return Err(io::Error::other("short read from a timerfd")),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The `n`-th real-time signal (SIGRTMIN + n), if there is one.
pub fn rt_signal(n: i32) -> Option<i32> {
    let s = libc::SIGRTMIN() + n;
    (s <= libc::SIGRTMAX()).then_some(s)
}

/// How many real-time signals there are.
pub fn rt_signals() -> i32 {
    libc::SIGRTMAX() - libc::SIGRTMIN() + 1
}

/// A set of signals.
#[derive(Clone, Copy)]
pub struct SigSet(libc::sigset_t);

impl std::fmt::Debug for SigSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let members: Vec<i32> = (1..=libc::SIGRTMAX())
            // SAFETY: a valid set and a signal number in range.
            .filter(|&s| unsafe { libc::sigismember(&self.0, s) } == 1)
            .collect();
        write!(f, "SigSet{members:?}")
    }
}

impl SigSet {
    pub fn of(signals: &[i32]) -> SigSet {
        // SAFETY: plain sigset manipulation on a local, zeroed sigset_t.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
            SigSet(set)
        }
    }

    /// Blocks until one of the set's signals is pending for this thread (or
    /// the process) and takes it (`sigwaitinfo`). The signals must be
    /// blocked. Returns the signal number.
    #[inline]
    pub fn wait(&self) -> io::Result<i32> {
        loop {
            // SAFETY: a valid set; the info pointer may be null.
            let rc = unsafe { libc::sigwaitinfo(&self.0, std::ptr::null_mut()) };
            if rc > 0 {
                return Ok(rc);
            }
            let e = last_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }

    /// Takes every pending instance of the set's signals without waiting.
    pub fn drain(&self) {
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid set and timeout; the info pointer may be null.
        while unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &zero) } > 0 {}
    }

    /// Blocks the set in the calling thread (and the threads it creates
    /// from now on); returns the previous mask.
    pub fn block(&self) -> SigSet {
        self.mask(libc::SIG_BLOCK)
    }

    /// Sets the calling thread's mask to this set; returns the previous one.
    pub fn set_mask(&self) -> SigSet {
        self.mask(libc::SIG_SETMASK)
    }

    fn mask(&self, how: libc::c_int) -> SigSet {
        // SAFETY: valid sets; pthread_sigmask only fails on a bad `how`.
        unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(how, &self.0, &mut old);
            SigSet(old)
        }
    }
}

/// Signals reserved for timers while it lives: blocked in the calling
/// thread (and so in every thread it starts afterwards), so that only a
/// thread waiting for them in `sigwaitinfo` takes them, and ignored, so
/// that a stray one can never end the process. Dropping it discards what
/// is still pending and restores the mask and the dispositions.
pub struct ReservedSignals {
    signals: Vec<i32>,
    old_mask: SigSet,
    old_actions: Vec<libc::sigaction>,
}

impl ReservedSignals {
    pub fn reserve(signals: &[i32]) -> io::Result<ReservedSignals> {
        let mut old_actions = Vec::new();
        for &s in signals {
            // SAFETY: a zeroed sigaction with SIG_IGN is valid; `old` is written by the kernel.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = libc::SIG_IGN;
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(s, &act, &mut old) != 0 {
                    return Err(last_error());
                }
                old_actions.push(old);
            }
        }
        let old_mask = SigSet::of(signals).block();
        Ok(ReservedSignals { signals: signals.to_vec(), old_mask, old_actions })
    }
}

impl Drop for ReservedSignals {
    fn drop(&mut self) {
        // Ignored while blocked, a signal still queues; setting SIG_IGN
        // again discards what is pending before the mask is restored.
        // SAFETY: valid sigactions.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = libc::SIG_IGN;
            for &s in &self.signals {
                libc::sigaction(s, &act, std::ptr::null_mut());
            }
            self.old_mask.set_mask();
            for (&s, old) in self.signals.iter().zip(&self.old_actions) {
                libc::sigaction(s, old, std::ptr::null_mut());
            }
        }
    }
}

/// A POSIX timer on CLOCK_MONOTONIC that signals its expiries.
pub struct PosixTimer(libc::timer_t);

// SAFETY: a timer id is a plain handle usable from any thread.
unsafe impl Send for PosixTimer {}

impl PosixTimer {
    /// `SIGEV_SIGNAL`: `signo` is sent to the process (any thread that
    /// does not block it, or one waiting for it).
    pub fn to_process(signo: i32) -> io::Result<PosixTimer> {
        Self::create(libc::SIGEV_SIGNAL, signo, 0)
    }

    /// `SIGEV_THREAD_ID`: `signo` is sent to the calling thread.
    pub fn to_this_thread(signo: i32) -> io::Result<PosixTimer> {
        Self::create(libc::SIGEV_THREAD_ID, signo, super::sched::thread_id())
    }

    fn create(notify: i32, signo: i32, tid: i32) -> io::Result<PosixTimer> {
        // SAFETY: a zeroed sigevent is valid; the kernel fills `id`.
        unsafe {
            let mut ev: libc::sigevent = std::mem::zeroed();
            ev.sigev_notify = notify;
            ev.sigev_signo = signo;
            ev.sigev_notify_thread_id = tid;
            let mut id: libc::timer_t = std::mem::zeroed();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut ev, &mut id) != 0 {
                return Err(last_error());
            }
            Ok(PosixTimer(id))
        }
    }

    /// First expiry at CLOCK_MONOTONIC `first_ns` (TIMER_ABSTIME), then
    /// every `period_ns`.
    pub fn arm_periodic(&self, first_ns: u64, period_ns: u64) -> io::Result<()> {
        let t = |ns: u64| libc::timespec { tv_sec: (ns / 1_000_000_000) as _, tv_nsec: (ns % 1_000_000_000) as _ };
        let spec = libc::itimerspec { it_interval: t(period_ns), it_value: t(first_ns) };
        // SAFETY: a live timer id and a valid itimerspec.
        if unsafe { libc::timer_settime(self.0, libc::TIMER_ABSTIME, &spec, std::ptr::null_mut()) } != 0 {
            return Err(last_error());
        }
        Ok(())
    }

    /// Expiries that came while the last signal was pending
    /// (`timer_getoverrun`), i.e. missed periods.
    #[inline]
    pub fn overrun(&self) -> u64 {
        // SAFETY: a live timer id.
        let n = unsafe { libc::timer_getoverrun(self.0) };
        n.max(0) as u64
    }
}

impl Drop for PosixTimer {
    fn drop(&mut self) {
        // SAFETY: the timer was created by us and is deleted once.
        unsafe { libc::timer_delete(self.0) };
    }
}

/// The calling thread's timer slack (`PR_GET_TIMERSLACK`), ns.
pub fn timer_slack() -> io::Result<u64> {
    Ok(rustix::thread::current_timer_slack()?)
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`), ns >= 1.
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    Ok(rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(ns.max(1)))?)
}

/// The relative sleeps the `sleep` probe times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SleepApi {
    /// nanosleep(2).
    Nanosleep,
    /// clock_nanosleep(2) on CLOCK_MONOTONIC, relative.
    ClockNanosleep,
    /// poll(2) on no descriptor with a timeout (ppoll, ns timeout).
    Poll,
    /// epoll_wait(2) on an empty epoll set with a timeout (epoll_pwait2, ns timeout; before Linux 5.11
    /// epoll_wait, ms timeout rounded up).
    EpollWait,
    /// select(2) on no descriptor with a timeout (us timeout).
    Select,
    /// A one-shot timerfd, armed then read.
    Timerfd,
}

impl SleepApi {
    pub const ALL: [SleepApi; 6] = [
        SleepApi::Nanosleep,
        SleepApi::ClockNanosleep,
        SleepApi::Poll,
        SleepApi::EpollWait,
        SleepApi::Select,
        SleepApi::Timerfd,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SleepApi::Nanosleep => "nanosleep",
            SleepApi::ClockNanosleep => "clock_nanosleep",
            SleepApi::Poll => "poll",
            SleepApi::EpollWait => "epoll_wait",
            SleepApi::Select => "select",
            SleepApi::Timerfd => "timerfd",
        }
    }

    /// The value `--api` takes for it.
    pub fn flag(self) -> &'static str {
        match self {
            SleepApi::ClockNanosleep => "clock-nanosleep",
            SleepApi::EpollWait => "epoll-wait",
            other => other.name(),
        }
    }

    /// The system call(s) that sleep, with `epoll_pwait2` or without.
    pub fn calls(self, epoll_pwait2: bool) -> &'static str {
        match self {
            SleepApi::Nanosleep => "nanosleep(2)",
            SleepApi::ClockNanosleep => "clock_nanosleep(2)",
            SleepApi::Poll => "ppoll(2)",
            SleepApi::EpollWait if epoll_pwait2 => "epoll_pwait2(2)",
            SleepApi::EpollWait => "epoll_wait(2)",
            SleepApi::Select => "select(2)",
            SleepApi::Timerfd => "timerfd_settime(2) and read(2)",
        }
    }
}

/// epoll_pwait2(2) on `epoll` with timeout `t`, for at most one event.
fn epoll_pwait2(epoll: &OwnedFd, t: &libc::timespec) -> libc::c_long {
    let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 1];
    // SAFETY: a live epoll fd, room for one event, a valid timeout, no sigmask.
    unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait2,
            epoll.as_fd().as_raw_fd(),
            ev.as_mut_ptr(),
            1,
            t as *const libc::timespec,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    }
}

/// Whether the kernel has epoll_pwait2(2) (Linux 5.11; ns timeouts): asked
/// once, on an empty epoll set with a zero timeout. Only ENOSYS says no.
pub fn has_epoll_pwait2() -> bool {
    let Ok(epoll) = rustix::event::epoll::create(rustix::event::epoll::CreateFlags::CLOEXEC) else {
        // No epoll set to ask with: the sleeps' own setup will say why.
        return true;
    };
    let rc = epoll_pwait2(&epoll, &libc::timespec { tv_sec: 0, tv_nsec: 0 });
    rc >= 0 || last_error().raw_os_error() != Some(libc::ENOSYS)
}

/// What the relative sleeps need, made once before measuring: an empty
/// epoll set and a timerfd.
pub struct Sleeper {
    epoll: OwnedFd,
    timer: TimerFd,
    /// `epoll-wait` sleeps in epoll_pwait2 (else epoll_wait, ms timeouts).
    epoll_pwait2: bool,
}

impl Sleeper {
    /// With `epoll_pwait2` false (the kernel lacks it, [`has_epoll_pwait2`]),
    /// `epoll-wait` calls epoll_wait(2) with the timeout in milliseconds,
    /// rounded up.
    pub fn new(epoll_pwait2: bool) -> io::Result<Sleeper> {
        Ok(Sleeper {
            epoll: rustix::event::epoll::create(rustix::event::epoll::CreateFlags::CLOEXEC)?,
            timer: TimerFd::new()?,
            epoll_pwait2,
        })
    }

    /// A sleeper whose epoll "set" is a timerfd: every `epoll-wait` fails
    /// (EINVAL), as a call the kernel refuses would.
    #[cfg(test)]
    pub fn with_failing_epoll() -> Sleeper {
        let not_epoll = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::CLOEXEC).unwrap();
        Sleeper { epoll: not_epoll, timer: TimerFd::new().unwrap(), epoll_pwait2: true }
    }

    /// Sleeps about `ns` through `api` (resuming after a signal for the
    /// remaining time where the API says how much remains). Returns an
    /// error only when the call itself fails.
    #[inline]
    pub fn sleep(&self, api: SleepApi, ns: u64) -> io::Result<()> {
        use rustix::thread::NanosleepRelativeResult as R;
        let mut left = ts(ns);
        match api {
            SleepApi::Nanosleep | SleepApi::ClockNanosleep => loop {
                let r = if api == SleepApi::Nanosleep {
                    rustix::thread::nanosleep(&left)
                } else {
                    rustix::thread::clock_nanosleep_relative(rustix::thread::ClockId::Monotonic, &left)
                };
                match r {
                    R::Ok => return Ok(()),
                    R::Interrupted(rest) => left = rest,
                    R::Err(e) => return Err(e.into()),
                }
            },
            SleepApi::Poll => match rustix::event::poll(&mut [], Some(&left)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
                Err(e) => Err(e.into()),
            },
            SleepApi::EpollWait => {
                let rc = if self.epoll_pwait2 {
                    let t = libc::timespec { tv_sec: left.tv_sec as _, tv_nsec: left.tv_nsec as _ };
                    epoll_pwait2(&self.epoll, &t)
                } else {
                    let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 1];
                    let ms = ns.div_ceil(1_000_000).min(i32::MAX as u64) as i32;
                    // SAFETY: a live epoll fd, room for one event.
                    libc::c_long::from(unsafe {
                        libc::epoll_wait(self.epoll.as_fd().as_raw_fd(), ev.as_mut_ptr(), 1, ms)
                    })
                };
                if rc < 0 && last_error().raw_os_error() != Some(libc::EINTR) { Err(last_error()) } else { Ok(()) }
            }
            SleepApi::Select => {
                let mut tv = libc::timeval {
                    tv_sec: (ns / 1_000_000_000) as _,
                    tv_usec: (ns % 1_000_000_000).div_ceil(1000) as _,
                };
                // SAFETY: no descriptor sets, a valid timeout.
                let rc = unsafe {
                    libc::select(0, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), &mut tv)
                };
                if rc < 0 && last_error().raw_os_error() != Some(libc::EINTR) { Err(last_error()) } else { Ok(()) }
            }
            SleepApi::Timerfd => {
                self.timer.arm_once(ns)?;
                self.timer.wait().map(|_| ())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::clock;

    #[test]
    fn every_sleep_api_sleeps_at_least_about_its_length() {
        let s = Sleeper::new(has_epoll_pwait2()).unwrap();
        for api in SleepApi::ALL {
            let t0 = clock::now();
            s.sleep(api, 2_000_000).unwrap();
            let took = clock::now() - t0;
            assert!((1_990_000..200_000_000).contains(&took), "{api:?} slept {took} ns for 2 ms");
        }
    }

    /// epoll_pwait2 came with Linux 5.11; without it, epoll_wait sleeps
    /// whole milliseconds, rounded up.
    #[test]
    fn epoll_pwait2_is_found_and_epoll_wait_rounds_up_to_a_millisecond() {
        let release = rustix::system::uname().release().to_string_lossy().into_owned();
        let mut v = release.split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
        assert_eq!(has_epoll_pwait2(), (major, minor) >= (5, 11), "kernel {release}");
        let ms = Sleeper::new(false).unwrap();
        let t0 = clock::now();
        ms.sleep(SleepApi::EpollWait, 200_000).unwrap();
        let took = clock::now() - t0;
        assert!(took >= 990_000, "epoll_wait with 200us asked for slept {took} ns: want the 1 ms it rounds up to");
        let failing = Sleeper::with_failing_epoll();
        let e = failing.sleep(SleepApi::EpollWait, 200_000).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    }

    #[test]
    fn timer_slack_is_read_and_set() {
        std::thread::spawn(|| {
            set_timer_slack(12_345).unwrap();
            assert_eq!(timer_slack().unwrap(), 12_345);
        })
        .join()
        .unwrap();
    }

    /// The process-directed kind (`PosixTimer::to_process`) needs every
    /// thread of the process to block its signal, which the test harness's
    /// other threads do not: the probe tests cover it in the real binary.
    #[test]
    fn periodic_timers_expire_and_signal() {
        std::thread::spawn(|| {
            let b = rt_signal(21).unwrap();
            let _reserved = ReservedSignals::reserve(&[b]).unwrap();
            let fd = TimerFd::new().unwrap();
            let t = PosixTimer::to_this_thread(b).unwrap();
            let start = clock::now() + 1_000_000;
            fd.arm_periodic(start, 1_000_000).unwrap();
            t.arm_periodic(start, 1_000_000).unwrap();
            for _ in 0..5 {
                assert!(fd.wait().unwrap() >= 1);
                assert_eq!(SigSet::of(&[b]).wait().unwrap(), b);
            }
            // Blocked for 5 periods: the expirations are counted, not lost.
            clock::spin_until(clock::now() + 5_500_000);
            assert!(fd.wait().unwrap() >= 5);
            SigSet::of(&[b]).wait().unwrap();
            assert!(t.overrun() >= 4, "{}", t.overrun());
            drop(t);
            SigSet::of(&[b]).drain();
        })
        .join()
        .unwrap();
    }
}
