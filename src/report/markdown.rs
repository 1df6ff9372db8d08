//! `rtscope report --format md`: the report's tables and verdicts as
//! GitHub-flavoured Markdown, for pasting into an issue or a wiki. The
//! plots stay in the HTML report.

use super::doc::{Block, Doc, Table};
use super::{Format, Input, Use, Written};
use anyhow::Result;
use std::io::Write;

pub struct Markdown;

impl Format for Markdown {
    fn name(&self) -> &'static str {
        "md"
    }

    fn extension(&self) -> &'static str {
        "md"
    }

    fn description(&self) -> &'static str {
        "Markdown: the tables, verdicts and warnings, without the plots"
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

/// A cell: pipes escaped, line breaks flattened.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn table(out: &mut dyn Write, t: &Table) -> Result<()> {
    writeln!(out)?;
    let head: Vec<String> = t.head.iter().map(|h| cell(h)).collect();
    writeln!(out, "| {} |", head.join(" | "))?;
    let rule: Vec<&str> =
        (0..t.head.len()).map(|i| if t.numeric.get(i).copied().unwrap_or(false) { "---:" } else { "---" }).collect();
    writeln!(out, "|{}|", rule.join("|"))?;
    for r in &t.rows {
        let cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
        writeln!(out, "| {} |", cells.join(" | "))?;
    }
    Ok(())
}

pub fn write_doc(doc: &Doc, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "# {}", doc.title)?;
    for c in &doc.chapters {
        writeln!(out, "\n## {}\n\n{}", c.title, c.subtitle)?;
        for s in &c.sections {
            writeln!(out, "\n### {}", s.title)?;
            // Consecutive preformatted blocks (episode verdicts) make one.
            let mut code: Vec<&str> = Vec::new();
            for b in &s.blocks {
                if let Block::Code(lines) = b {
                    code.extend(lines.iter().map(String::as_str));
                    continue;
                }
                flush(out, &mut code)?;
                match b {
                    Block::Para(p) => writeln!(out, "\n{p}")?,
                    Block::Verdict { outcome, text, details } => {
                        writeln!(out, "\n**{}**: {text}", outcome.as_str().to_uppercase())?;
                        if !details.is_empty() {
                            writeln!(out)?;
                        }
                        for (line, subs) in details {
                            writeln!(out, "- {}", line.replace('\n', " "))?;
                            for s in subs {
                                writeln!(out, "  - {}", s.replace('\n', " "))?;
                            }
                        }
                    }
                    Block::FigureData(t) => table(out, t)?,
                    Block::Warning { serious, message, fix } => {
                        writeln!(out, "\n- {} {message} (fix: {fix})", if *serious { "**warning:**" } else { "note:" })?
                    }
                    Block::Table(t) => table(out, t)?,
                    Block::List(items) => {
                        writeln!(out)?;
                        for (i, item) in items.iter().enumerate() {
                            writeln!(out, "{}. {}", i + 1, item.replace('\n', " "))?;
                        }
                    }
                    // The plots are the HTML report's.
                    Block::Figure { .. } | Block::Figures(..) | Block::Code(_) => {}
                }
            }
            flush(out, &mut code)?;
        }
    }
    Ok(())
}

fn flush(out: &mut dyn Write, code: &mut Vec<&str>) -> Result<()> {
    if code.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n```")?;
    for l in code.drain(..) {
        writeln!(out, "{l}")?;
    }
    writeln!(out, "```")?;
    Ok(())
}
