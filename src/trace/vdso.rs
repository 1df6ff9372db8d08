//! The vDSO, the kernel's code in every process (`clock_gettime` and its
//! kin): the same image in every 64-bit process of a kernel, no file on
//! disk. rtscope reads its own (its `[vdso]` mapping, through
//! `/proc/self/mem`): the unwinder takes its tables, and a copy written once
//! to a temporary file names its frames by its ELF symbols like any other
//! file's, in processes that have exited too.

use std::path::Path;

/// The vDSO image rtscope itself maps. None where it has none, or it
/// cannot be read.
pub fn own_image() -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let (start, end) = line.split_whitespace().next()?.split_once('-')?;
    let (start, end) = (u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?);
    let mut b = vec![0u8; usize::try_from(end.checked_sub(start)?).ok()?];
    std::fs::File::open("/proc/self/mem").ok()?.read_exact_at(&mut b, start).ok()?;
    Some(b)
}

/// The copy of the image to name frames by, written at the first need.
#[derive(Default)]
pub struct VdsoFile(Option<Option<tempfile::TempPath>>);

impl VdsoFile {
    /// Its path; None where the image could not be read or written.
    pub fn path(&mut self) -> Option<&Path> {
        self.0
            .get_or_insert_with(|| {
                let image = own_image()?;
                let mut f = tempfile::Builder::new().prefix("rtscope-vdso-").suffix(".so").tempfile().ok()?;
                std::io::Write::write_all(&mut f, &image).ok()?;
                Some(f.into_temp_path())
            })
            .as_deref()
    }
}

/// The module name of the vDSO's frames.
pub const MODULE: &str = "[vdso]";
