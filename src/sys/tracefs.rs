//! Finding tracefs, and mounting it when nobody has.

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
    rustix::mount::mount("nodev", MOUNT_POINT, "tracefs", rustix::mount::MountFlags::empty(), None)
        .map_err(|e| format!("tracefs is not mounted and mounting it at {MOUNT_POINT} failed ({e})"))?;
    if !Path::new(MOUNT_POINT).join("instances").is_dir() {
        let _ = unmount(Path::new(MOUNT_POINT));
        return Err(format!("tracefs mounted at {MOUNT_POINT} has no instances/ (kernel too old)"));
    }
    Ok((MOUNT_POINT.into(), true))
}

/// Unmounts the tracefs rtscope mounted.
pub fn unmount(root: &Path) -> Result<(), String> {
    rustix::mount::unmount(root, rustix::mount::UnmountFlags::empty()).map_err(|e| e.to_string())
}
