//! `net`, `net-flood`, `net-tcp`: traffic over loopback. `net` sends UDP
//! datagrams at a set rate (250 packets/s by default, as the Siemens CE 3.0
//! assessment did), `net-flood` as fast as it can, `net-tcp` streams
//! bulk data through TCP connections. Each side is its own thread.

use super::{Intensity, LoadCtx, LoadSpec, Running, Workload};
use crate::sys::clock;
use anyhow::{Context, Result};
use rtscope_model::characterisation::{Measure, Target};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Rate,
    Flood,
    Tcp,
}

pub struct Net(pub Mode);

/// UDP payload, bytes.
const DATAGRAM: usize = 256;
/// How often a blocked side looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);

impl Workload for Net {
    fn name(&self) -> &'static str {
        match self.0 {
            Mode::Rate => "net",
            Mode::Flood => "net-flood",
            Mode::Tcp => "net-tcp",
        }
    }
    fn about(&self) -> &'static str {
        match self.0 {
            Mode::Rate => "UDP datagrams of 256 bytes over loopback at a set rate; intensity: packets/s (250)",
            Mode::Flood => "UDP datagrams over loopback as fast as they go; intensity: sender threads (1)",
            Mode::Tcp => "bulk TCP over loopback; intensity: connections (1)",
        }
    }
    fn intensity(&self) -> Option<Intensity> {
        Some(match self.0 {
            Mode::Rate => Intensity { unit: "packets/s", min: 1, max: 1_000_000, default: |_| 250 },
            Mode::Flood => Intensity { unit: "sender threads", min: 1, max: 64, default: |_| 1 },
            Mode::Tcp => Intensity { unit: "connections", min: 1, max: 64, default: |_| 1 },
        })
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        match self.0 {
            Mode::Rate => udp_pair(spec, run, Some(spec.intensity)),
            Mode::Flood => (0..spec.intensity).try_for_each(|_| udp_pair(spec, run, None)),
            Mode::Tcp => (0..spec.intensity).try_for_each(|_| tcp_pair(spec, run)),
        }
    }
    /// `net`: its rate, flagged 10 % short; `net-flood`: at least 1000
    /// datagrams/s per sender (loopback carries hundreds of thousands);
    /// `net-tcp` states none (segments of up to 64 kB: few packets).
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        let (asked, limit, asked_text) = match self.0 {
            Mode::Rate => {
                let asked = spec.intensity as f64;
                let limit = asked * super::RATE_LIMIT;
                (asked, limit, format!("{asked} datagrams/s received on lo (flagged below {limit})"))
            }
            Mode::Flood => {
                let limit = 1000.0 * spec.intensity as f64;
                (
                    limit,
                    limit,
                    format!("datagrams on lo as fast as {} senders go (flagged below {limit}/s)", spec.intensity),
                )
            }
            Mode::Tcp => return None,
        };
        Some(Target {
            load: spec.label.clone(),
            cpus: spec.cpus.clone(),
            measure: Measure::LoopbackPackets,
            asked,
            limit,
            asked_text,
            devices: Vec::new(),
        })
    }
}

/// A receiving thread and a sending thread: at `rate` packets/s, or flat out.
fn udp_pair(spec: &LoadSpec, run: &mut Running, rate: Option<u64>) -> Result<()> {
    let rx = UdpSocket::bind("127.0.0.1:0").context("binding a UDP socket on 127.0.0.1")?;
    rx.set_read_timeout(Some(POLL))?;
    let tx = UdpSocket::bind("127.0.0.1:0").context("binding a UDP socket on 127.0.0.1")?;
    tx.connect(rx.local_addr()?)?;
    run.spawn("net-rx", &spec.cpus, move |ctx| {
        let mut buf = [0u8; 2048];
        while !ctx.stopping() {
            let _ = rx.recv(&mut buf);
        }
    })?;
    run.spawn("net-tx", &spec.cpus, move |ctx| {
        let payload = [0x5au8; DATAGRAM];
        match rate {
            Some(r) => paced(ctx, &tx, &payload, r),
            None => {
                while !ctx.stopping() {
                    for _ in 0..64 {
                        let _ = tx.send(&payload);
                    }
                }
            }
        }
    })
}

/// Sends `rate` datagrams per second on a fixed grid of CLOCK_MONOTONIC
/// instants; after a delay it sends what was due (at most 1 s's worth), so
/// that the rate holds on average.
pub(super) fn paced(ctx: &LoadCtx, tx: &UdpSocket, payload: &[u8], rate: u64) {
    let period = 1_000_000_000 / rate;
    // Sleep at most 50 ms at a time, to see a stop request.
    let batch = (50_000_000 / period).max(1);
    let mut next = clock::now();
    while !ctx.stopping() {
        let now = clock::now();
        if now + 1_000_000_000 < next {
            next = now;
        }
        if now.saturating_sub(next) > 1_000_000_000 {
            next = now - 1_000_000_000;
        }
        let mut sent = 0;
        while next <= clock::now() && sent < batch {
            if let Err(e) = tx.send(payload)
                && e.kind() != std::io::ErrorKind::ConnectionRefused
            {
                ctx.error(format!("net: send: {e}"));
            }
            next += period;
            sent += 1;
        }
        clock::sleep_until(next.min(clock::now() + 50_000_000));
    }
}

/// A connection over loopback: one thread writes 64 KiB blocks, one reads.
fn tcp_pair(spec: &LoadSpec, run: &mut Running) -> Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").context("listening on 127.0.0.1")?;
    let mut out = TcpStream::connect(listener.local_addr()?).context("connecting over loopback")?;
    let (mut inn, _) = listener.accept()?;
    inn.set_read_timeout(Some(POLL))?;
    out.set_write_timeout(Some(POLL))?;
    run.spawn("tcp-rx", &spec.cpus, move |ctx| {
        let mut buf = vec![0u8; 1 << 16];
        while !ctx.stopping() {
            if let Ok(0) = inn.read(&mut buf) {
                return;
            }
        }
    })?;
    run.spawn("tcp-tx", &spec.cpus, move |ctx| {
        let buf = vec![0xa5u8; 1 << 16];
        while !ctx.stopping() {
            let _ = out.write(&buf);
        }
    })
}
