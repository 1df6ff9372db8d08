//! The monitor's shipped files (dist/): the alert rules pass promtool and
//! their unit tests, the Grafana dashboard reads only what the monitor
//! serves and ranks the worst machine first, the systemd unit verifies.

mod common;
use common::dist::*;
use common::prom::which;
use common::*;
use std::process::Command;

/// The shipped alert rules pass promtool's check and their unit tests
/// (each alert fires on the machine it should, and only there).
#[test]
fn shipped_alert_rules_pass_promtool() {
    if !has("promtool (Debian's prometheus package; .ci/run installs it)", which("promtool").is_some()) {
        return;
    }
    let dir = dist("prometheus");
    for args in [&["check", "rules", "rtscope-alerts.yml"][..], &["test", "rules", "rtscope-alerts.test.yml"]] {
        let o = Command::new("promtool").args(args).current_dir(&dir).output().unwrap();
        assert!(o.status.success(), "promtool {args:?}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("SUCCESS"), "{}", text(&o));
    }
    for name in alert_exprs().iter().flat_map(|e| metric_names(e)) {
        assert!(served_names().contains(&name), "the rules use {name}, which the monitor does not serve");
    }
}

/// The dashboard reads only what the monitor serves, and its first panel
/// is the fleet table with the worst machine first.
#[test]
fn shipped_dashboard_ranks_the_worst_machines_first() {
    let exprs = dashboard_exprs();
    let served = served_names();
    for name in exprs.iter().flat_map(|e| metric_names(e)) {
        assert!(served.contains(&name), "the dashboard uses {name}, which the monitor does not serve");
    }
    assert!(exprs[0].starts_with("sort_desc(max by (instance)"), "{}", exprs[0]);
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dist("grafana/rtscope-fleet.json")).unwrap()).unwrap();
    let first =
        d["panels"].as_array().unwrap().iter().find(|p| p["gridPos"]["y"] == 0 && p["gridPos"]["x"] == 0).unwrap();
    let sort = first["transformations"].as_array().unwrap().iter().find(|t| t["id"] == "sortBy").unwrap();
    assert_eq!(sort["options"]["sort"][0]["desc"], true);
    assert_eq!(sort["options"]["sort"][0]["field"], "worst case");
}

/// The shipped systemd unit passes `systemd-analyze verify`, and rtscope
/// takes its command line.
#[test]
fn shipped_systemd_unit_verifies() {
    if !has("systemd-analyze (Debian's systemd; .ci/run installs it)", which("systemd-analyze").is_some()) {
        return;
    }
    let dir = tempdir();
    let unit = std::fs::read_to_string(dist("systemd/rtscope-monitor.service")).unwrap();
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap();
    let args: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(args[..2], ["/usr/local/bin/rtscope", "monitor"]);
    let o = Command::new(BIN).args(&args[1..]).arg("--help").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let copy = dir.join("rtscope-monitor.service");
    std::fs::write(&copy, unit.replace("/usr/local/bin/rtscope", BIN)).unwrap();
    let o = Command::new("systemd-analyze").arg("verify").arg(&copy).output().unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && !said.contains("rtscope-monitor.service"), "{}", text(&o));
}
