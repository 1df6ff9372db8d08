//! SIGINT / SIGTERM end a run cleanly: they set a stop flag that every
//! thread polls. Measuring threads block the signals so that their sleeps
//! are never interrupted.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Installs handlers that set `stop` on SIGINT, SIGTERM and SIGHUP. A
/// second signal while stopping exits at once with status 130.
pub fn install(stop: &Arc<AtomicBool>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(stop))?;
        signal_hook::flag::register(sig, Arc::clone(stop))?;
    }
    Ok(())
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and the
/// threads it creates afterwards).
pub fn block_in_this_thread() {
    // SAFETY: plain sigset manipulation on a local, zeroed sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Blocks SIGINT, SIGTERM, SIGHUP, SIGPIPE and every real-time signal in
/// the calling thread: for rtscope's background threads (loads, the /proc
/// sampler), which live across cells. A probe's timers signal the process
/// with real-time signals that only its measuring threads may take; a
/// thread started before them, with those signals open, would take (and,
/// as they are ignored, lose) them.
pub fn block_in_background_thread() {
    block_in_this_thread();
    // SAFETY: plain sigset manipulation on a local, zeroed sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in libc::SIGRTMIN()..=libc::SIGRTMAX() {
            libc::sigaddset(&mut set, s);
        }
        // A load writing to a socket whose reader has stopped gets EPIPE,
        // not the SIGPIPE that ends rtscope (see `default_sigpipe`).
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Output piped into `head` ends rtscope quietly, as any Unix tool: SIGPIPE
/// gets its default action back (Rust ignores it).
pub fn default_sigpipe() {
    // SAFETY: restoring the default disposition of SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
