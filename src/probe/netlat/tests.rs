//! netlat's pure parts: paths, flags, counts and messages.
use super::*;

#[test]
fn packets_round_trip() {
    let mut p = Packet::new(packet::DATA, 77, 12, 1_000_000);
    p.tx_seq = 11;
    p.tx_sched = 1500;
    p.a = 3;
    let mut buf = [0u8; 54];
    p.encode(&mut buf);
    assert_eq!(Packet::decode(&buf), Some(p));
    assert_eq!(Packet::decode(&buf[..51]), None);
    buf[0] ^= 1;
    assert_eq!(Packet::decode(&buf), None, "not rtscope's");
    assert_eq!(packet::d32(u64::MAX), packet::NONE - 1);
}

#[test]
fn paths_parse() {
    assert_eq!(NetPath::parse("loopback"), Ok(NetPath::Loopback));
    assert_eq!(NetPath::parse("netns"), Ok(NetPath::Netns));
    assert_eq!(NetPath::parse("iface:eth1"), Ok(NetPath::Iface("eth1".into())));
    assert!(NetPath::parse("iface:").unwrap_err().contains("iface:NAME"));
    assert!(NetPath::parse("wifi").is_err());
}
