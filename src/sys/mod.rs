//! Everything that touches the kernel directly: scheduling, affinity,
//! memory locking, clocks, signals, child processes,
//! `/dev/cpu_dma_latency`, the system inventory, file reads in steps, timers and sleeps, the
//! CPU's cycle counter and caches, UDP sockets with kernel timestamps,
//! network namespaces, the `trace_marker` that `--tracemark` writes
//! to, the marker lines that `--marker` toggles, and serial ports in raw
//! mode (the serial round trip). Most of rtscope's `unsafe` and `libc` is
//! here; the rest sits in the
//! measuring code that needs it (osbench's shared-memory tests, netlat's
//! sender process, disturb's system-call spinner).

pub mod cache;
pub mod cgroup;
pub mod clock;
pub mod clocks;
pub mod cpu;
pub mod cpuidle;
pub mod dma;
pub mod fs;
pub mod gpio;
pub mod inventory;
pub mod ipc;
pub mod marker;
pub mod mem;
pub mod net;
pub mod netns;
pub mod perf;
pub mod process;
pub mod sched;
pub mod serial;
pub mod signals;
pub mod syscount;
pub mod timers;
pub mod tracefs;
pub mod tracemark;
pub mod tsc;
