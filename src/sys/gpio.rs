//! One GPIO line as an output, through the GPIO character device's v2
//! uAPI (`/dev/gpiochipN`, Linux 5.10+): requested with its direction as
//! found, its value read, then made an output at that value (no glitch),
//! toggled with one `GPIO_V2_LINE_SET_VALUES_IOCTL` each time; at the end
//! its direction and value are set back as found and the line released.
//! The uAPI's structures are defined here (the libc crate has none of
//! them); a test compares their sizes and offsets with the kernel's header.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;

const NAME_SIZE: usize = 32;
const LINES_MAX: usize = 64;
const ATTRS_MAX: usize = 10;
const FLAG_USED: u64 = 1 << 0;
const FLAG_INPUT: u64 = 1 << 2;
const FLAG_OUTPUT: u64 = 1 << 3;
const ATTR_ID_OUTPUT_VALUES: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ChipInfo {
    pub name: [u8; NAME_SIZE],
    pub label: [u8; NAME_SIZE],
    pub lines: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct LineAttribute {
    pub id: u32,
    pub padding: u32,
    /// The union of flags, values and debounce_period_us.
    pub value: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct LineConfigAttribute {
    pub attr: LineAttribute,
    pub mask: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct LineConfig {
    pub flags: u64,
    pub num_attrs: u32,
    pub padding: [u32; 5],
    pub attrs: [LineConfigAttribute; ATTRS_MAX],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct LineRequest {
    pub offsets: [u32; LINES_MAX],
    pub consumer: [u8; NAME_SIZE],
    pub config: LineConfig,
    pub num_lines: u32,
    pub event_buffer_size: u32,
    pub padding: [u32; 5],
    pub fd: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct LineValues {
    pub bits: u64,
    pub mask: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct LineInfo {
    pub name: [u8; NAME_SIZE],
    pub consumer: [u8; NAME_SIZE],
    pub offset: u32,
    pub num_attrs: u32,
    pub flags: u64,
    pub attrs: [LineAttribute; ATTRS_MAX],
    pub padding: [u32; 4],
}

/// `_IOR` / `_IOWR` of the GPIO ioctls (type 0xB4).
const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | (0xB4 << 8) | nr
}
const READ: u64 = 2;
const READ_WRITE: u64 = 3;
pub(crate) const GET_CHIPINFO: u64 = ioc(READ, 0x01, std::mem::size_of::<ChipInfo>());
pub(crate) const GET_LINEINFO: u64 = ioc(READ_WRITE, 0x05, std::mem::size_of::<LineInfo>());
pub(crate) const GET_LINE: u64 = ioc(READ_WRITE, 0x07, std::mem::size_of::<LineRequest>());
pub(crate) const SET_CONFIG: u64 = ioc(READ_WRITE, 0x0D, std::mem::size_of::<LineConfig>());
pub(crate) const GET_VALUES: u64 = ioc(READ_WRITE, 0x0E, std::mem::size_of::<LineValues>());
pub(crate) const SET_VALUES: u64 = ioc(READ_WRITE, 0x0F, std::mem::size_of::<LineValues>());

fn zeroed<T>() -> T {
    // SAFETY: only used for the plain-data uAPI structures above, for
    // which all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

/// One ioctl on `fd` with `arg`.
fn ioctl<T>(fd: i32, req: u64, arg: &mut T) -> io::Result<()> {
    // SAFETY: `arg` is the structure `req` reads and writes, of its size.
    if unsafe { libc::ioctl(fd, req as _, arg as *mut T) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A requested line, driven as an output.
pub struct GpioLine {
    line: File,
    /// Its direction flags and value as found.
    found_flags: u64,
    found_high: bool,
}

impl GpioLine {
    /// Requests line `offset` of `chip` as an output at its value as
    /// found; refusals (no such chip, not a GPIO chip, no such line, the
    /// line busy) name `flag` and the fix. Returns the line and its level.
    pub fn request(flag: &str, chip: &Path, offset: u32) -> Result<(GpioLine, bool), String> {
        let shown = chip.display();
        let file = std::fs::OpenOptions::new().read(true).write(true).open(chip).map_err(|e| {
            format!("{flag}: cannot open {shown} ({e}): give a GPIO chip of this machine (ls /dev/gpiochip*), as root")
        })?;
        let fd = file.as_raw_fd();
        let mut chip_info: ChipInfo = zeroed();
        ioctl(fd, GET_CHIPINFO, &mut chip_info).map_err(|e| {
            format!("{flag}: {shown} is not a GPIO chip ({e}): give /dev/gpiochipN (ls /dev/gpiochip*)")
        })?;
        if offset >= chip_info.lines {
            return Err(format!(
                "{flag}: {shown} has no line {offset} (it has {} lines, 0..{}): give one of them",
                chip_info.lines,
                chip_info.lines.saturating_sub(1)
            ));
        }
        let mut info: LineInfo = zeroed();
        info.offset = offset;
        ioctl(fd, GET_LINEINFO, &mut info).map_err(|e| format!("{flag}: {shown} line {offset}: {e}"))?;
        let busy = |who: &[u8]| {
            let who = String::from_utf8_lossy(who.split(|&b| b == 0).next().unwrap_or_default()).into_owned();
            format!(
                "{flag}: {shown} line {offset} is busy (used by {}): give a free line (gpioinfo lists them)",
                if who.is_empty() { "the kernel".into() } else { who }
            )
        };
        if info.flags & FLAG_USED != 0 {
            return Err(busy(&info.consumer));
        }
        // Requested with its direction as found (neither flag).
        let mut req: LineRequest = zeroed();
        req.offsets[0] = offset;
        req.consumer[..15].copy_from_slice(b"rtscope-marker\0");
        req.num_lines = 1;
        ioctl(fd, GET_LINE, &mut req).map_err(|e| match e.raw_os_error() {
            Some(libc::EBUSY) => busy(&[]),
            _ => format!("{flag}: {shown} line {offset}: the kernel refused the request ({e})"),
        })?;
        // SAFETY: the kernel gave this new descriptor to us alone.
        let line = unsafe { File::from_raw_fd(req.fd) };
        let mut values = LineValues { bits: 0, mask: 1 };
        ioctl(line.as_raw_fd(), GET_VALUES, &mut values)
            .map_err(|e| format!("{flag}: {shown} line {offset}: cannot read its value ({e})"))?;
        let found_high = values.bits & 1 != 0;
        let g = GpioLine { line, found_flags: info.flags & (FLAG_INPUT | FLAG_OUTPUT), found_high };
        g.configure(FLAG_OUTPUT, found_high)
            .map_err(|e| format!("{flag}: {shown} line {offset}: cannot make it an output ({e})"))?;
        Ok((g, found_high))
    }

    /// Sets the line's direction (`flags`) and, for an output, its value.
    fn configure(&self, flags: u64, high: bool) -> io::Result<()> {
        let mut config: LineConfig = zeroed();
        config.flags = flags;
        if flags & FLAG_OUTPUT != 0 {
            config.num_attrs = 1;
            config.attrs[0] = LineConfigAttribute {
                attr: LineAttribute { id: ATTR_ID_OUTPUT_VALUES, padding: 0, value: u64::from(high) },
                mask: 1,
            };
        }
        ioctl(self.line.as_raw_fd(), SET_CONFIG, &mut config)
    }

    /// Drives the line: one ioctl, nothing else (for a measuring thread).
    #[inline]
    pub fn set(&self, high: bool) -> io::Result<()> {
        let mut values = LineValues { bits: u64::from(high), mask: 1 };
        ioctl(self.line.as_raw_fd(), SET_VALUES, &mut values)
    }
}

impl Drop for GpioLine {
    /// The line's direction and value as found; closing releases it.
    fn drop(&mut self) {
        let _ = self.configure(if self.found_flags == 0 { FLAG_INPUT } else { self.found_flags }, self.found_high);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The kernel's sizes and offsets, from its header, by a C program.
    fn kernel_layout() -> Option<String> {
        let header = Path::new("/usr/include/linux/gpio.h");
        if !header.exists() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("layout.c");
        std::fs::write(
            &src,
            r#"#include <stdio.h>
#include <stddef.h>
#include <linux/gpio.h>
int main(void) {
    printf("%zu %zu %zu\n", sizeof(struct gpiochip_info), offsetof(struct gpiochip_info, lines), sizeof(struct gpio_v2_line_attribute));
    printf("%zu %zu\n", offsetof(struct gpio_v2_line_attribute, values), sizeof(struct gpio_v2_line_config_attribute));
    printf("%zu %zu %zu\n", sizeof(struct gpio_v2_line_config), offsetof(struct gpio_v2_line_config, num_attrs), offsetof(struct gpio_v2_line_config, attrs));
    printf("%zu %zu %zu %zu %zu\n", sizeof(struct gpio_v2_line_request), offsetof(struct gpio_v2_line_request, consumer), offsetof(struct gpio_v2_line_request, config), offsetof(struct gpio_v2_line_request, num_lines), offsetof(struct gpio_v2_line_request, fd));
    printf("%zu %zu\n", sizeof(struct gpio_v2_line_values), offsetof(struct gpio_v2_line_values, mask));
    printf("%zu %zu %zu %zu\n", sizeof(struct gpio_v2_line_info), offsetof(struct gpio_v2_line_info, offset), offsetof(struct gpio_v2_line_info, flags), offsetof(struct gpio_v2_line_info, attrs));
    printf("%lx %lx %lx %lx %lx %lx\n", (unsigned long)GPIO_GET_CHIPINFO_IOCTL, (unsigned long)GPIO_V2_GET_LINEINFO_IOCTL, (unsigned long)GPIO_V2_GET_LINE_IOCTL, (unsigned long)GPIO_V2_LINE_SET_CONFIG_IOCTL, (unsigned long)GPIO_V2_LINE_GET_VALUES_IOCTL, (unsigned long)GPIO_V2_LINE_SET_VALUES_IOCTL);
    return 0;
}
"#,
        )
        .unwrap();
        let exe = dir.path().join("layout");
        let cc = std::process::Command::new("cc").arg(&src).arg("-o").arg(&exe).output().ok()?;
        assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
        let out = std::process::Command::new(&exe).output().unwrap();
        Some(String::from_utf8(out.stdout).unwrap())
    }

    #[test]
    fn the_structures_and_ioctls_are_the_kernels() {
        let Some(kernel) = kernel_layout() else {
            eprintln!("skipped: no /usr/include/linux/gpio.h or no cc here (apt-get install linux-libc-dev gcc)");
            return;
        };
        let ours = format!(
            "{} {} {}\n{} {}\n{} {} {}\n{} {} {} {} {}\n{} {}\n{} {} {} {}\n{:x} {:x} {:x} {:x} {:x} {:x}\n",
            size_of::<ChipInfo>(),
            offset_of!(ChipInfo, lines),
            size_of::<LineAttribute>(),
            offset_of!(LineAttribute, value),
            size_of::<LineConfigAttribute>(),
            size_of::<LineConfig>(),
            offset_of!(LineConfig, num_attrs),
            offset_of!(LineConfig, attrs),
            size_of::<LineRequest>(),
            offset_of!(LineRequest, consumer),
            offset_of!(LineRequest, config),
            offset_of!(LineRequest, num_lines),
            offset_of!(LineRequest, fd),
            size_of::<LineValues>(),
            offset_of!(LineValues, mask),
            size_of::<LineInfo>(),
            offset_of!(LineInfo, offset),
            offset_of!(LineInfo, flags),
            offset_of!(LineInfo, attrs),
            GET_CHIPINFO,
            GET_LINEINFO,
            GET_LINE,
            SET_CONFIG,
            GET_VALUES,
            SET_VALUES,
        );
        assert_eq!(ours, kernel);
    }

    #[test]
    fn a_missing_chip_and_a_file_are_refused_naming_the_flag_and_the_fix() {
        let e = GpioLine::request("--marker", Path::new("/dev/gpiochip99"), 0).err().unwrap();
        assert!(e.starts_with("--marker: cannot open /dev/gpiochip99") && e.contains("ls /dev/gpiochip*"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("chip");
        std::fs::write(&file, "").unwrap();
        let e = GpioLine::request("--marker", &file, 0).err().unwrap();
        assert!(e.contains("is not a GPIO chip") && e.contains("/dev/gpiochipN"), "{e}");
    }
}
