//! Finding tracefs, and mounting it when nobody has.

use crate::sys::ipc::Leftover;
use std::path::{Path, PathBuf};

/// Where tracefs is mounted today, or the standard mount point.
const MOUNT_POINT: &str = "/sys/kernel/tracing";
const LEGACY: &str = "/sys/kernel/debug/tracing";

/// The tracefs root, and whether rtscope mounted it (and should unmount
/// it when done).
pub fn find_or_mount() -> Result<(PathBuf, bool), String> {
    for root in [MOUNT_POINT, LEGACY] {
        if Path::new(root).join("instances").is_dir() {
            return Ok((root.into(), false));
        }
    }
    if !Path::new(MOUNT_POINT).is_dir() {
        return Err(format!("{MOUNT_POINT} does not exist: this kernel has no tracefs (CONFIG_TRACING)"));
    }
    // Registered with the janitor before it is mounted: should rtscope be
    // killed from here on, the janitor unmounts it (when no instance is
    // left in it, as [`unmount`]'s callers do).
    let janitor = crate::sys::ipc::janitor().map_err(|e| format!("cannot start rtscope's janitor ({e})"))?;
    janitor.registry().add_path(Leftover::TracefsMount, Path::new(MOUNT_POINT));
    if let Err(e) = rustix::mount::mount("nodev", MOUNT_POINT, "tracefs", rustix::mount::MountFlags::empty(), None) {
        forget(Path::new(MOUNT_POINT));
        return Err(format!("tracefs is not mounted and mounting it at {MOUNT_POINT} failed ({e})"));
    }
    if !Path::new(MOUNT_POINT).join("instances").is_dir() {
        let _ = unmount(Path::new(MOUNT_POINT));
        return Err(format!("tracefs mounted at {MOUNT_POINT} has no instances/ (kernel too old)"));
    }
    Ok((MOUNT_POINT.into(), true))
}

/// Unmounts the tracefs rtscope mounted.
pub fn unmount(root: &Path) -> Result<(), String> {
    rustix::mount::unmount(root, rustix::mount::UnmountFlags::empty()).map_err(|e| e.to_string())?;
    forget(root);
    Ok(())
}

/// Tells the janitor to leave the tracefs rtscope mounted at `root` as it
/// is (unmounted, or left mounted because another tracer uses it).
pub fn forget(root: &Path) {
    if let Ok(j) = crate::sys::ipc::janitor() {
        j.registry().remove_path(Leftover::TracefsMount, root);
    }
}
