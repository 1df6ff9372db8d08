//! The HTML report: the snapshot of its structure for a fixed run
//! (tests/data/report-run.json), self-contained; and real runs' reports
//! rendered in a browser (headless chromium): no console error, every plot
//! drawn, the first screen answering, the page's size.
//! `UPDATE_SNAPSHOTS=1 cargo test --test report_html` rewrites the snapshot
//! after an intended change.

mod common;
use common::reports::*;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The HTML's skeleton: articles, sections, headings, verdicts, tables with
/// their header and row count, and every plot with its drawn series; text
/// and coordinates left out.
fn outline(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    let mut depth = 0usize;
    let attr = |tag: &str, name: &str| {
        let key = format!(" {name}=\"");
        tag.find(&key).map(|i| {
            let v = &tag[i + key.len()..];
            v[..v.find('"').unwrap()].to_string()
        })
    };
    while let Some(i) = rest.find('<') {
        rest = &rest[i..];
        let end = rest.find('>').unwrap();
        let tag = &rest[1..end];
        let name: String = tag.trim_start_matches('/').chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        let closing = tag.starts_with('/');
        let after = &rest[end + 1..];
        let text_until_tag = || after[..after.find('<').unwrap_or(after.len())].trim().to_string();
        match (name.as_str(), closing) {
            ("article" | "section" | "figure", false) => {
                out.push_str(&format!(
                    "{}{name}{}\n",
                    "  ".repeat(depth),
                    attr(tag, "id").map(|i| format!("#{i}")).unwrap_or_default()
                ));
                depth += 1;
            }
            ("article" | "section" | "figure", true) => depth -= 1,
            ("h1" | "h2" | "h3", false) => {
                out.push_str(&format!("{}{name} {}\n", "  ".repeat(depth), text_until_tag()))
            }
            ("div", false) if attr(tag, "class").is_some_and(|c| c.starts_with("verdict") || c.starts_with("warn")) => {
                out.push_str(&format!("{}div.{}\n", "  ".repeat(depth), attr(tag, "class").unwrap()))
            }
            ("table", false) => {
                let body = &after[..after.find("</table>").unwrap()];
                let heads: Vec<String> = body
                    .split("<th")
                    .skip(1)
                    .filter(|h| h.starts_with('>') || h.starts_with(' '))
                    .map(|h| {
                        let h = &h[h.find('>').unwrap() + 1..];
                        h[..h.find("</th>").unwrap()].to_string()
                    })
                    .collect();
                let rows = body.matches("<tr>").count() - usize::from(!heads.is_empty());
                out.push_str(&format!("{}table [{}] {rows} rows\n", "  ".repeat(depth), heads.join(" | ")));
            }
            ("svg", false) => {
                let body = &after[..after.find("</svg>").unwrap()];
                let mut kinds: Vec<String> = Vec::new();
                for (k, _) in body.match_indices(" class=\"series\"") {
                    let open = body[..k].rfind('<').unwrap();
                    kinds.push(body[open + 1..k].to_string());
                }
                kinds.dedup();
                out.push_str(&format!(
                    "{}svg#{} series {} ({}){}\n",
                    "  ".repeat(depth),
                    attr(tag, "id").unwrap_or_default(),
                    body.matches(" class=\"series\"").count(),
                    kinds.join(","),
                    if body.contains("class=\"requirement\"") { " requirement" } else { "" }
                ));
            }
            _ => {}
        }
        rest = after;
    }
    out
}

#[test]
fn html_report_structure_matches_its_snapshot_and_is_self_contained() {
    let (dir, db) = imported();
    let file = dir.join("r.html");
    report(&["report", "last", "-o", file.to_str().unwrap(), "--db", &db]);
    let html = std::fs::read_to_string(&file).unwrap();
    snapshot("report-run.html.outline", &outline(&html));
    // Nothing to fetch: no script, stylesheet, image, font or frame, and
    // no address but the SVG namespace.
    for bad in ["<script", "<link", "<img", "<iframe", "@import", "@font-face", " src=", "url(http"] {
        assert!(!html.contains(bad), "{bad} in a self-contained report");
    }
    let outside = html.replace("http://www.w3.org/2000/svg", "");
    assert!(!outside.contains("http://") && !outside.contains("https://"), "an external address in the report");
    assert!(html.contains("@media print"), "a print style");
    // Every plot drew something; the MTTF curves are there, with the target.
    let plots = html.matches("<svg").count();
    assert!(plots >= 6, "{plots} plots");
    let mttf = &html[html.find("<svg id=\"r1-mttf-0-0\"").expect("the MTTF plot")..];
    let mttf = &mttf[..mttf.find("</svg>").unwrap()];
    assert_eq!(mttf.matches("<polyline class=\"series\"").count(), 4, "a curve per default period");
    assert!(mttf.contains("class=\"requirement\"") && mttf.contains(">1 day<"), "the target on a human axis");
    for svg in html.split("<svg").skip(1) {
        let svg = &svg[..svg.find("</svg>").unwrap()];
        assert!(svg.contains("class=\"series\""), "an empty plot: {}", &svg[..svg.len().min(200)]);
    }
}

/// The browser: chromium, installed with apt-get where it is missing; or
/// None where it cannot be installed (see `has`: CI fails then).
fn chromium() -> Option<PathBuf> {
    let find = || {
        ["chromium", "chromium-browser"].iter().find_map(|b| {
            std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(b)).find(|p| p.is_file()))
        })
    };
    if let Some(p) = find() {
        return Some(p);
    }
    eprintln!("chromium not found: installing Debian's chromium");
    let ok = Command::new("apt-get")
        .args(["install", "-y", "-qq", "chromium"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .is_ok_and(|s| s.success());
    let found = find();
    if found.is_none() {
        let why = if ok { "apt-get installed no binary" } else { "apt-get could not install it" };
        has(&format!("chromium ({why})"), false);
    }
    found
}

/// Runs headless chromium on `page`; returns its stderr (console messages
/// included) and stdout.
fn headless(browser: &Path, page: &Path, extra: &[&str]) -> (String, Vec<u8>) {
    let url = format!("file://{}", page.display());
    let o = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"])
        .args(["--enable-logging=stderr", "--v=0", "--no-first-run"])
        .arg(format!("--user-data-dir={}", page.with_extension("profile").display()))
        .args(extra)
        .arg(&url)
        .output()
        .expect("run chromium");
    let _ = std::fs::remove_dir_all(page.with_extension("profile"));
    assert!(o.status.success(), "chromium failed on {url}: {}", text(&o));
    (String::from_utf8_lossy(&o.stderr).into_owned(), o.stdout)
}

fn console_messages(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn chromium_renders_the_report_of_a_real_run_without_a_console_error() {
    let fx = Fixture::root();
    let Some(browser) = chromium() else { return };
    let cpu = last_cpu().to_string();
    let o = rtscope(&[
        "wakeup",
        "--cpus",
        &cpu,
        "--duration",
        "2s",
        "--trace",
        "--episodes",
        "2",
        "--checkpoint",
        "500ms",
        "--quiet",
        "--db",
        &fx.db,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    std::fs::create_dir_all(&out).unwrap();
    let page = out.join("report.html");
    // With a task set: the response-time plot is rendered too (at 1e-2 the
    // jitter is observed, far below the 1 s deadline).
    let tasks = out.join("tasks.toml");
    std::fs::write(&tasks, "[[task]]\nname = \"slow\"\nwcet = \"1ms\"\nperiod = \"1s\"\n").unwrap();
    let tasks = tasks.to_str().unwrap();
    report(&["report", "last", "-o", page.to_str().unwrap(), "--tasks", tasks, "--error-rate", "1e-2", "--db", &fx.db]);
    // The check itself: a page with a broken SVG attribute logs an error.
    let broken = out.join("broken.html");
    std::fs::write(&broken, "<!DOCTYPE html><svg width=\"10\" height=\"10\"><path d=\"M 1 x\"/></svg>").unwrap();
    let (err, _) = headless(&browser, &broken, &["--dump-dom"]);
    assert!(!console_messages(&err).is_empty(), "chromium's console errors must be seen: {err}");
    // The report: no console message at all (it has no script), every
    // plot in the rendered DOM has something drawn.
    let png = out.join("report.png");
    // The first screen: the summary, its verdict and its headline plot.
    let (err, _) = headless(&browser, &page, &["--window-size=1400,900", &format!("--screenshot={}", png.display())]);
    let console = console_messages(&err);
    assert!(console.is_empty(), "console errors rendering the report:\n{}", console.join("\n"));
    let (err, dom) = headless(&browser, &page, &["--dump-dom"]);
    assert!(console_messages(&err).is_empty());
    let dom = String::from_utf8(dom).unwrap();
    let plots: Vec<&str> = dom.split("<svg").skip(1).map(|s| &s[..s.find("</svg>").unwrap()]).collect();
    assert!(plots.len() >= 5, "{} plots in the rendered page", plots.len());
    for p in &plots {
        assert!(p.contains("class=\"series\""), "an empty plot in the rendered page");
    }
    let sched = plots.iter().find(|p| p.starts_with(" id=\"r1-sched-0\"")).expect("the response-time plot");
    assert!(sched.contains("class=\"requirement\""), "the deadline drawn");
    // The MTTF curves of the tail analysis, with their points and target.
    let mttf = plots.iter().find(|p| p.starts_with(" id=\"r1-mttf-0-0\"")).expect("the MTTF plot in the rendered page");
    assert!(mttf.contains("class=\"pt\"") && mttf.contains("class=\"requirement\""), "MTTF points and target");
    // The screenshot has ink, and colour: the verdict and the plot's curve.
    let (ink, colour) = ink_and_colour(&png);
    assert!(ink > 1.0, "the first screen is nearly blank: {ink:.2}% of its pixels have ink");
    assert!(colour > 1_000, "the plot's colours are missing: {colour} coloured pixels");
}

/// The share of a PNG's pixels with ink (percent), and how many are in
/// colour (the plots' curves, the verdict's bar).
fn ink_and_colour(png: &Path) -> (f64, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let (mut ink, mut colour, mut n) = (0usize, 0usize, 0usize);
    for p in buf[..info.buffer_size()].chunks(px) {
        n += 1;
        let (r, g, b) = (p[0] as i32, p[1] as i32, p[2] as i32);
        if r + g + b < 600 {
            ink += 1;
        }
        if (r - g).abs() > 60 || (g - b).abs() > 60 || (r - b).abs() > 60 {
            colour += 1;
        }
    }
    eprintln!("screenshot {}: {n} pixels, {ink} ink, {colour} in colour", png.display());
    (100.0 * ink as f64 / n.max(1) as f64, colour)
}

/// The page's width and height in a 1400 x 900 window, as the browser lays
/// it out: (width, height) with every section collapsed, then expanded.
/// A copy of the page gets a script that measures it (the report has none).
fn page_size(browser: &Path, page: &Path) -> ((u64, u64), (u64, u64)) {
    let copy = page.with_extension("measure.html");
    let script = "<script>(function(){var d=document.documentElement;var c=[d.scrollWidth,d.scrollHeight];\
        document.querySelectorAll('details').forEach(function(x){x.open=true});\
        var p=document.createElement('pre');p.textContent='SIZES '+c.join(' ')+' '+d.scrollWidth+' '+d.scrollHeight;\
        document.body.appendChild(p);})();</script>";
    std::fs::write(&copy, std::fs::read_to_string(page).unwrap() + script).unwrap();
    let (_, dom) = headless(browser, &copy, &["--window-size=1400,900", "--dump-dom"]);
    let dom = String::from_utf8(dom).unwrap();
    let at = dom.rfind("SIZES ").unwrap_or_else(|| panic!("no sizes in the measured page: {dom:.300}"));
    let n: Vec<u64> = dom[at + 6..].split(['<', ' ']).take(4).map(|v| v.parse().unwrap()).collect();
    ((n[0], n[1]), (n[2], n[3]))
}

/// What a new user does (`rtscope run --quick`, then `rtscope report`),
/// with 1 s cells: about 35 s of measuring on this 2-vCPU guest, 18 cells.
/// The terminal's summary fits 100 columns and comes last; the report's
/// first screen answers, the page never scrolls sideways at 1400 px, and
/// it fits 6 screens of 1400 x 900 collapsed, 30 expanded.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_quick_runs_answer_fits_the_first_screen_and_its_report_a_few() {
    let fx = Fixture::root();
    let Some(browser) = chromium() else { return };
    let o = rtscope(&["run", "--quick", "--duration", "1s", "--db", &fx.db, "-q"]);
    assert_eq!(o.status.code(), Some(0), "the yardstick never changes the exit code: {}", text(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let summary = &out[out.find("-- answer").expect("the answer after the details")..];
    for l in summary.lines() {
        assert!(l.chars().count() <= 100, "a summary line wider than 100 columns: {l}");
    }
    assert!(!out.contains('\x1b'), "no colour on a pipe");
    for part in [
        "verdict ",
        "against the profile omac (OMAC, ",
        "a yardstick: never the exit code",
        "machine ",
        "worst load ",
        "next ",
    ] {
        assert!(summary.contains(part), "{part} missing:\n{summary}");
    }
    for probe in ["wakeup latency", "noise ", "sleep ", "ptimer ", "netlat ", "osbench "] {
        assert!(summary.lines().any(|l| l.starts_with(probe) && l.contains(" n=")), "{probe}:\n{summary}");
    }
    // The run's JSON has the summary's own block.
    let o = rtscope(&["show", "last", "--json", "--db", &fx.db]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["summary"];
    assert_eq!(s["loads"], serde_json::json!(["idle", "cpu", "net"]), "{s}");
    assert_eq!(s["verdict"]["from"], "default");
    assert_eq!(s["verdict"]["gates"], false);
    assert_eq!(s["rows"][0]["probe"], "wakeup");
    assert!(s["rows"][0]["cells"][0]["samples"].as_u64().unwrap() > 100, "{s}");
    assert!(s["worst_load"]["why"].is_string() && s["machine"]["preemption"].is_string(), "{s}");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-quick");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("report.html");
    report(&["report", "last", "-o", page.to_str().unwrap(), "--db", &fx.db]);
    let html = std::fs::read_to_string(&page).unwrap();
    let first = html.find("<section").unwrap();
    assert!(html[first..].starts_with("<section id=\"r1-summary\" class=\"open\">"), "the summary first");
    assert_eq!(html.matches("<details>").count(), html.matches("<section").count() - 1, "the rest collapsed");
    // One headline plot per probe in the summary; the probe sections in
    // the summary's order, wake-up latency first.
    let summary = &html[first..html[first..].find("</section>").unwrap() + first];
    assert_eq!(summary.matches("<svg").count(), 6, "a headline plot per probe");
    assert!(summary.contains("class=\"requirement\""), "the requirement drawn on the wake-up plot");
    let at = |t: &str| html.find(t).unwrap_or_else(|| panic!("{t} missing"));
    assert!(at("<h3>wakeup: latency (us)</h3>") < at("<h3>noise: ") && at("<h3>noise: ") < at("<h3>osbench"));
    let ((w, h), (we, he)) = page_size(&browser, &page);
    eprintln!("report of a --quick run: {w} x {h} px collapsed, {we} x {he} expanded");
    assert!(w <= 1400 && we <= 1400, "the page scrolls sideways: {w} / {we} px wide");
    assert!(h <= 6 * 900, "collapsed, more than 6 screens: {h} px");
    assert!(he <= 30 * 900, "expanded, more than 30 screens: {he} px");
    let png = dir.join("first-screen.png");
    let (err, _) = headless(&browser, &page, &["--window-size=1400,900", &format!("--screenshot={}", png.display())]);
    assert!(console_messages(&err).is_empty(), "{err}");
    let (ink, colour) = ink_and_colour(&png);
    assert!(ink > 2.0 && colour > 2_000, "the first screen: {ink:.2}% ink, {colour} coloured pixels");
}
