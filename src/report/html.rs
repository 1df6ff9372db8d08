//! `rtscope report`: one self-contained HTML file. Plots are inline SVG;
//! there is no script, no web font and no link to anything outside the
//! file, so it opens offline, mails as one attachment and prints (figures
//! and tables are kept whole on a page). The summary comes first, open;
//! every other section is collapsed under its title (`<details>`).

use super::doc::{Block, Doc, Outcome, Table};
use super::svg::esc;
use super::{Format, Input, Use, Written};
use anyhow::Result;
use std::io::Write;

pub struct Html;

impl Format for Html {
    fn name(&self) -> &'static str {
        "html"
    }

    fn extension(&self) -> &'static str {
        "html"
    }

    fn description(&self) -> &'static str {
        "One self-contained HTML file with inline SVG plots"
    }

    fn uses(&self) -> &'static [Use] {
        &[Use::Report]
    }

    /// A chapter per run, judged against the requirements and task set of
    /// `input`, else each run's own, else the default yardstick.
    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<Written> {
        super::write_judged_doc(input, out, write_doc)
    }
}

const STYLE: &str = "
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif;
       color: #111; background: #fff; max-width: 1180px; margin: 1.5em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin: .2em 0; }
h2 { font-size: 1.35em; border-bottom: 2px solid #0072B2; padding-bottom: .15em; margin-top: 1.8em; }
h3 { font-size: 1.12em; margin-top: 1.5em; }
.sub { color: #444; margin: 0 0 1em; }
section.open h3 { margin-top: .8em; }
details > summary { cursor: pointer; list-style: none; border-bottom: 1px solid #e4e4e4; }
details > summary::-webkit-details-marker { display: none; }
details > summary h3 { display: inline-block; margin: .35em 0; font-size: 1.05em; }
details > summary::before { content: '\\25B8'; display: inline-block; width: 1.2em; color: #0072B2; }
details[open] > summary::before { content: '\\25BE'; }
ol.next { margin: .2em 0 .8em; padding-left: 2em; }
td { overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: .4em 0 1em; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid #d0d0d0; padding: 2px 9px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.n, th.n { text-align: right; white-space: nowrap; }
table.kv td:first-child { color: #444; white-space: nowrap; }
figure { margin: .8em 0 1.2em; }
figure svg { max-width: 100%; height: auto; }
figcaption { color: #333; font-size: .92em; margin-top: .2em; }
.row { display: flex; flex-wrap: wrap; gap: 8px; }
.row svg { flex: 0 0 auto; max-width: 100%; height: auto; }
pre { background: #f6f6f6; padding: .4em .6em; white-space: pre-wrap; margin: .6em 0 .2em; font-size: .92em; }
.verdict { font-weight: 600; padding: .4em .7em; border-left: 6px solid; margin: .5em 0; display: grid; grid-template-columns: max-content 1fr; column-gap: .3em; }
.verdict > .text, .verdict > ul.details { grid-column: 2; }
.verdict.pass { border-color: #009E73; } .verdict.fail { border-color: #D55E00; } .verdict.none { border-color: #888; }
.badge { display: inline-block; min-width: 7em; }
.verdict.none .badge { min-width: 10.5em; }
.verdict ul.details { font-weight: normal; margin: .25em 0 0; padding-left: 1.1em; }
.verdict ul.details ul { color: #333; font-size: .94em; padding-left: 1.2em; }
.warn { margin: .3em 0; padding: .2em .6em; border-left: 4px solid #E69F00; }
.warn.note { border-color: #56B4E9; }
.warn .fix { color: #333; }
footer { color: #666; margin-top: 3em; font-size: .9em; }
@media print {
  body { max-width: none; margin: 0; font-size: 11px; }
  h2 { break-before: auto; break-after: avoid; }
  h3 { break-after: avoid; }
  figure, table, pre, .row svg { break-inside: avoid; }
}
";

fn table(out: &mut dyn Write, t: &Table, class: &str) -> Result<()> {
    let cls = |i: usize| if t.numeric.get(i).copied().unwrap_or(false) { " class=\"n\"" } else { "" };
    write!(out, "<table{}>", if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") })?;
    if t.head.iter().any(|h| !h.is_empty()) {
        write!(out, "<thead><tr>")?;
        for (i, h) in t.head.iter().enumerate() {
            write!(out, "<th{}>{}</th>", cls(i), esc(h))?;
        }
        write!(out, "</tr></thead>")?;
    }
    writeln!(out, "<tbody>")?;
    for r in &t.rows {
        write!(out, "<tr>")?;
        for (i, c) in r.iter().enumerate() {
            write!(out, "<td{}>{}</td>", cls(i), esc(c))?;
        }
        writeln!(out, "</tr>")?;
    }
    writeln!(out, "</tbody></table>")?;
    Ok(())
}

/// Text for a paragraph: escaped, and what it quotes between backticks
/// (a command, a flag) as code rather than literal backticks.
fn prose(s: &str) -> String {
    let parts: Vec<&str> = s.split('`').collect();
    if parts.len().is_multiple_of(2) {
        // An odd number of backticks: not quotes.
        return esc(s);
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| if i % 2 == 1 { format!("<code>{}</code>", esc(p)) } else { esc(p) })
        .collect()
}

fn block(out: &mut dyn Write, b: &Block) -> Result<()> {
    match b {
        Block::Para(s) => writeln!(out, "<p>{}</p>", prose(s))?,
        Block::Verdict { outcome, text, details } => {
            let class = match outcome {
                Outcome::Pass => "pass",
                Outcome::Fail => "fail",
                Outcome::NotEnoughData => "none",
            };
            write!(
                out,
                "<div class=\"verdict {class}\"><span class=\"badge\">{}</span><span class=\"text\">{}</span>",
                esc(&outcome.as_str().to_uppercase()),
                prose(text)
            )?;
            if !details.is_empty() {
                write!(out, "<ul class=\"details\">")?;
                for (line, subs) in details {
                    write!(out, "<li>{}", prose(line))?;
                    if !subs.is_empty() {
                        write!(out, "<ul>")?;
                        for s in subs {
                            write!(out, "<li>{}</li>", esc(s))?;
                        }
                        write!(out, "</ul>")?;
                    }
                    write!(out, "</li>")?;
                }
                write!(out, "</ul>")?;
            }
            writeln!(out, "</div>")?
        }
        Block::FigureData(_) => {}
        Block::Warning { serious, message, fix } => writeln!(
            out,
            "<div class=\"warn{}\"><b>{}</b> {}<br><span class=\"fix\">fix: {}</span></div>",
            if *serious { "" } else { " note" },
            if *serious { "warning:" } else { "note:" },
            prose(message),
            prose(fix)
        )?,
        Block::Table(t) => {
            let kv = t.head.iter().all(String::is_empty);
            table(out, t, if kv { "kv" } else { "" })?
        }
        Block::Figure { svg, caption } => {
            writeln!(out, "<figure>{svg}<figcaption>{}</figcaption></figure>", esc(caption))?
        }
        Block::Figures(svgs, caption) => {
            write!(out, "<figure><div class=\"row\">")?;
            for s in svgs {
                out.write_all(s.as_bytes())?;
            }
            writeln!(out, "</div><figcaption>{}</figcaption></figure>", esc(caption))?
        }
        Block::Code(lines) => writeln!(out, "<pre>{}</pre>", esc(&lines.join("\n")))?,
        Block::List(items) => {
            write!(out, "<ol class=\"next\">")?;
            for i in items {
                write!(out, "<li>{}</li>", prose(i))?;
            }
            writeln!(out, "</ol>")?
        }
    }
    Ok(())
}

/// Renders a document as one HTML file.
pub fn write_doc(doc: &Doc, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"rtscope {}\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>",
        env!("CARGO_PKG_VERSION"),
        esc(&doc.title)
    )?;
    writeln!(out, "<header><h1>{}</h1></header>", esc(&doc.title))?;
    for c in &doc.chapters {
        writeln!(
            out,
            "<article id=\"{}\">\n<h2>{}</h2>\n<p class=\"sub\">{}</p>",
            c.id,
            esc(&c.title),
            esc(&c.subtitle)
        )?;
        // The summary open; every other section collapsed under its title,
        // a click away (its anchor still leads to it).
        for s in &c.sections {
            if s.open {
                writeln!(out, "<section id=\"{}\" class=\"open\">\n<h3>{}</h3>", s.id, esc(&s.title))?;
            } else {
                writeln!(out, "<section id=\"{}\"><details>\n<summary><h3>{}</h3></summary>", s.id, esc(&s.title))?;
            }
            for b in &s.blocks {
                block(out, b)?;
            }
            writeln!(out, "{}</section>", if s.open { "" } else { "</details>" })?;
        }
        writeln!(out, "</article>")?;
    }
    writeln!(
        out,
        "<footer>rtscope {}: times in microseconds (us) on CLOCK_MONOTONIC; every figure from the stored histograms.</footer>\n</body>\n</html>",
        env!("CARGO_PKG_VERSION")
    )?;
    Ok(())
}
