//! `tty:/dev/ttyS1[:BAUD]`: a serial port kept transmitting (raw, at BAUD,
//! 115200 by default) and drained of what comes back, so that its UART
//! interrupts (the NT real-time study's worst figure came from a tty ISR).
//! Its check counts the port's IRQ line (/sys/class/tty/NAME/irq, and the
//! port's name in /proc/interrupts). The port's settings are restored at
//! the end, and what is left to send is flushed.

use super::{LoadCtx, LoadSpec, Running, Workload, devices};
use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::characterisation::Target;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::Duration;

pub struct Tty;

const DEFAULT_BAUD: u32 = 115_200;

/// `tty:`'s argument, typed.
#[derive(Debug, PartialEq)]
pub struct TtyArg {
    pub path: PathBuf,
    pub baud: u32,
}

/// `/dev/ttyS1`, `/dev/ttyS1:9600`.
pub fn parse_arg(text: &str) -> Result<TtyArg, String> {
    let (path, baud) = devices::split_setting(text, DEFAULT_BAUD, |b| {
        b.parse::<u32>()
            .ok()
            .filter(|b| (50..=4_000_000).contains(b))
            .ok_or_else(|| format!("baud '{b}' is not a rate from 50 to 4000000 (e.g. 115200)"))
    })?;
    if !path.starts_with("/dev/") {
        return Err(format!("'{path}' is not a device under /dev (e.g. tty:/dev/ttyS1 or tty:/dev/ttyUSB0:9600)"));
    }
    Ok(TtyArg { path: PathBuf::from(path), baud })
}

fn arg(spec: &LoadSpec) -> Result<TtyArg> {
    devices::arg(spec, parse_arg)
}

/// `ttyS1` for /dev/ttyS1.
fn name_of(a: &TtyArg) -> String {
    a.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn open(a: &TtyArg) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK).open(&a.path)
}

impl Workload for Tty {
    fn name(&self) -> &'static str {
        "tty"
    }
    fn about(&self) -> &'static str {
        "tty:/dev/ttyS1[:BAUD]; a serial port kept sending (raw, BAUD 115200) and drained of what comes back \
         (checked: its UART's IRQ line)"
    }
    fn intensity(&self) -> Option<super::Intensity> {
        None
    }
    fn takes_device(&self) -> bool {
        true
    }
    fn check(&self, spec: &LoadSpec) -> Result<()> {
        let a = arg(spec)?;
        let m = std::fs::metadata(&a.path).with_context(|| format!("load '{}': {}", spec.label, a.path.display()))?;
        if !m.file_type().is_char_device() {
            bail!("load '{}': {} is not a character device (a serial port)", spec.label, a.path.display());
        }
        let f = open(&a).map_err(|e| {
            anyhow!(
                "load '{}': cannot open {}: {e} (no UART behind it? see setserial -g)",
                spec.label,
                a.path.display()
            )
        })?;
        let mut t = rustix::termios::tcgetattr(&f)
            .map_err(|e| anyhow!("load '{}': {} is not a terminal: {e}", spec.label, a.path.display()))?;
        t.set_speed(a.baud).map_err(|e| anyhow!("load '{}': baud {}: {e}", spec.label, a.baud))?;
        Ok(())
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        let a = arg(spec)?;
        let f = open(&a).with_context(|| format!("opening {}", a.path.display()))?;
        let before =
            rustix::termios::tcgetattr(&f).with_context(|| format!("{} is not a terminal", a.path.display()))?;
        let mut raw = before.clone();
        raw.make_raw();
        raw.set_speed(a.baud)?;
        rustix::termios::tcsetattr(&f, rustix::termios::OptionalActions::Now, &raw)
            .with_context(|| format!("setting {} raw at {} baud", a.path.display(), a.baud))?;
        let path = a.path.clone();
        run.spawn("tty", &spec.cpus, move |ctx| {
            if let Err(e) = pump(ctx, &f) {
                ctx.fail(format!("tty: {}: {e}", path.display()));
            }
            let _ = rustix::termios::tcflush(&f, rustix::termios::QueueSelector::IOFlush);
            let _ = rustix::termios::tcsetattr(&f, rustix::termios::OptionalActions::Now, &before);
        })
    }
    /// The port's interrupts moving: at least 10/s on its line.
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        let a = arg(spec).ok()?;
        let name = name_of(&a);
        let lines = devices::tty_lines(&name);
        let what = format!("{name}'s UART interrupts moving (its line: {})", lines.join(" or "));
        Some(devices::irq_target(spec, lines, &what))
    }
}

/// Keeps the port's output queue full and its input drained until the
/// load stops: non-blocking writes of 64 bytes, a pause of 2 ms when the
/// queue is full.
fn pump(ctx: &LoadCtx, f: &std::fs::File) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let out = [0x55u8; 64];
    let mut back = [0u8; 256];
    let (mut w, mut r) = (f, f);
    while !ctx.stopping() {
        loop {
            match r.read(&mut back) {
                Ok(n) if n > 0 => {}
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        match w.write(&out) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(2)),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_into_a_port_and_a_baud_rate() {
        assert_eq!(parse_arg("/dev/ttyS1").unwrap(), TtyArg { path: "/dev/ttyS1".into(), baud: 115_200 });
        assert_eq!(parse_arg("/dev/ttyS1:9600").unwrap().baud, 9600);
        assert!(parse_arg("ttyS1").unwrap_err().contains("/dev"));
        assert!(parse_arg("/dev/ttyS1:fast").unwrap_err().contains("baud"));
    }
}
