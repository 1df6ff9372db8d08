//! Network namespaces on veth pairs, for the tests that need a real
//! network device other than loopback (a veth's counts show in
//! /proc/net/dev; it has no IRQ line).

use super::text;
use std::process::{Command, Stdio};

/// Network namespaces with a veth pair each, named for this test run;
/// removed when dropped (a panic too), and with them the veth pairs.
pub struct Namespaces {
    pub names: Vec<String>,
    /// The host ends of the veth pairs.
    pub links: Vec<String>,
}

impl Namespaces {
    pub fn ip(args: &[&str]) {
        let o = Command::new("ip").args(args).output().expect("run ip");
        assert!(o.status.success(), "ip {}: {}", args.join(" "), text(&o));
    }

    /// `n` namespaces named `rtscope-TAG-PID-I`, the i-th reached at
    /// 10.X.Y.(4i+2) from 10.X.Y.(4i+1) on the host (a /30 each in a
    /// private /24); returns them and the addresses in them.
    pub fn create(tag: &str, n: usize) -> (Namespaces, Vec<String>) {
        let pid = std::process::id();
        let t = tag.chars().next().unwrap_or('x');
        let net = format!("10.{}.{}", 200 + pid % 50, (pid / 50) % 256);
        let mut ns = Namespaces { names: Vec::new(), links: Vec::new() };
        let mut addrs = Vec::new();
        for i in 0..n {
            let name = format!("rtscope-{tag}-{pid}-{i}");
            let (host, peer) = (format!("r{t}{pid:x}h{i}"), format!("r{t}{pid:x}n{i}"));
            Self::ip(&["netns", "add", &name]);
            ns.names.push(name.clone());
            Self::ip(&["link", "add", &host, "type", "veth", "peer", "name", &peer]);
            ns.links.push(host.clone());
            Self::ip(&["link", "set", &peer, "netns", &name]);
            let (h, p) = (format!("{net}.{}", 4 * i + 1), format!("{net}.{}", 4 * i + 2));
            Self::ip(&["addr", "add", &format!("{h}/30"), "dev", &host]);
            Self::ip(&["link", "set", &host, "up"]);
            Self::ip(&["-n", &name, "addr", "add", &format!("{p}/30"), "dev", &peer]);
            Self::ip(&["-n", &name, "link", "set", &peer, "up"]);
            Self::ip(&["-n", &name, "link", "set", "lo", "up"]);
            addrs.push(p);
        }
        (ns, addrs)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end in it, and its peer;
        // a pair not moved yet goes with its host end.
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
        for l in &self.links {
            let _ = Command::new("ip").args(["link", "del", l]).stderr(Stdio::null()).output();
        }
    }
}
