//! `net-to:ADDR:PORT[:RATE]`: UDP datagrams of 256 bytes to another host
//! (a `netlat --serve`, or any UDP sink) at RATE packets/s (1000), so that
//! the NIC that routes to ADDR interrupts, where `net` stays on loopback.
//! Its check counts that NIC's IRQ lines (the PCI function's vectors, the
//! sources named after the interface); an interface with no line of its
//! own (a veth, a bridge) is judged by its packets sent, and an address
//! that routes over loopback is flagged, saying so.

use super::{LoadSpec, Running, Workload, devices};
use anyhow::{Context, Result};
use rtscope_model::characterisation::{Measure, Target};
use std::net::{SocketAddr, UdpSocket};

pub struct NetTo;

/// Packets per second when none is given.
const DEFAULT_RATE: u64 = 1000;

/// `net-to:`'s argument, typed.
#[derive(Debug, PartialEq)]
pub struct NetToArg {
    pub addr: SocketAddr,
    pub rate: u64,
}

/// `10.0.0.2:9`, `10.0.0.2:9:5000`, `[fd00::2]:9:100`.
pub fn parse_arg(text: &str) -> Result<NetToArg, String> {
    let hint = "write net-to:ADDR:PORT[:RATE], e.g. net-to:192.168.1.20:9 or net-to:[fd00::2]:9:5000";
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(NetToArg { addr, rate: DEFAULT_RATE });
    }
    let (a, r) = text.rsplit_once(':').ok_or_else(|| format!("'{text}' is not ADDR:PORT; {hint}"))?;
    let addr = a.parse::<SocketAddr>().map_err(|_| format!("'{a}' is not ADDR:PORT; {hint}"))?;
    let rate = r.parse::<u64>().ok().filter(|r| (1..=1_000_000).contains(r));
    let rate = rate.ok_or_else(|| format!("rate '{r}' is not packets/s from 1 to 1000000; {hint}"))?;
    Ok(NetToArg { addr, rate })
}

fn arg(spec: &LoadSpec) -> Result<NetToArg> {
    devices::arg(spec, parse_arg)
}

/// The interface the kernel routes `addr` over (`ip route get`), or None
/// when it cannot say.
pub fn route_iface(addr: &SocketAddr) -> Option<String> {
    let out = std::process::Command::new("ip")
        .args(["-o", "route", "get", &addr.ip().to_string()])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == "dev" {
            return words.next().map(str::to_string);
        }
    }
    // `ip route get 127.0.0.1` says `local 127.0.0.1 dev lo`; a local
    // address of another interface goes over lo too.
    text.starts_with("local").then(|| "lo".to_string())
}

impl Workload for NetTo {
    fn name(&self) -> &'static str {
        "net-to"
    }
    fn about(&self) -> &'static str {
        "net-to:ADDR:PORT[:RATE]; UDP datagrams of 256 bytes to another host (a netlat --serve, any UDP sink) at \
         RATE packets/s (1000), through the NIC that routes there (checked: its IRQ lines)"
    }
    fn intensity(&self) -> Option<super::Intensity> {
        None
    }
    fn takes_device(&self) -> bool {
        true
    }
    fn check(&self, spec: &LoadSpec) -> Result<()> {
        arg(spec).map(|_| ())
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        let a = arg(spec)?;
        let local: SocketAddr = if a.addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse()?;
        let tx = UdpSocket::bind(local).context("binding a UDP socket")?;
        tx.connect(a.addr).with_context(|| format!("no route to {}", a.addr))?;
        run.spawn("net-to", &spec.cpus, move |ctx| super::net::paced(ctx, &tx, &[0x5au8; 256], a.rate))
    }
    /// The NIC's interrupts moving (at least 10/s on its lines); its
    /// packets sent (90 % of the rate) where it has no line; flagged at
    /// once over loopback.
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        let a = arg(spec).ok()?;
        let iface = route_iface(&a.addr);
        let lines = iface.as_deref().map(devices::net_lines).unwrap_or_default();
        let ip = a.addr.ip();
        Some(match iface.as_deref() {
            Some("lo") => devices::irq_target(
                spec,
                Vec::new(),
                &format!(
                    "a NIC's interrupts moving, but {ip} routes over loopback (lo), which has no device and no \
                     interrupts: name an address on another host"
                ),
            ),
            Some(i) if lines.is_empty() => {
                let limit = a.rate as f64 * super::RATE_LIMIT;
                Target {
                    load: spec.label.clone(),
                    cpus: spec.cpus.clone(),
                    measure: Measure::IfacePackets,
                    asked: a.rate as f64,
                    limit,
                    asked_text: format!(
                        "{} packets/s sent on {i}, which has no IRQ line of its own (flagged below {limit})",
                        a.rate
                    ),
                    devices: vec![i.to_string()],
                }
            }
            Some(i) => {
                let what = format!("{i}'s interrupts moving ({})", devices::describe(&lines));
                devices::irq_target(spec, lines, &what)
            }
            None => devices::irq_target(
                spec,
                Vec::new(),
                &format!("a NIC's interrupts moving, but no route to {ip} was found (ip route get)"),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_into_an_address_and_a_rate() {
        assert_eq!(parse_arg("10.0.0.2:9").unwrap(), NetToArg { addr: "10.0.0.2:9".parse().unwrap(), rate: 1000 });
        assert_eq!(parse_arg("10.0.0.2:9:5000").unwrap().rate, 5000);
        assert_eq!(parse_arg("[fd00::2]:9:100").unwrap().addr, "[fd00::2]:9".parse::<SocketAddr>().unwrap());
        assert!(parse_arg("10.0.0.2").unwrap_err().contains("ADDR:PORT"));
        assert!(parse_arg("10.0.0.2:9:0").unwrap_err().contains("rate"));
        assert_eq!(route_iface(&"127.0.0.1:9".parse().unwrap()).as_deref(), Some("lo"));
    }
}
