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

/// Text as Markdown shows it and no more: what HTML would read as markup
/// escaped, so that an imported run's text (a hostname, a note, a command
/// line: `<script>`) is shown, never run, as the HTML report does. Only a
/// `<` that opens a tag (a letter, `/`, `!` or `?` after it) and a `&` that
/// starts an entity are: `<= 100us` and `&&` read as written.
fn md(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    for (i, c) in s.char_indices() {
        let next = b.get(i + 1).copied().unwrap_or(b' ');
        match c {
            '<' if next.is_ascii_alphabetic() || matches!(next, b'/' | b'!' | b'?') => out.push_str("&lt;"),
            '&' if entity_at(&s[i + 1..]) => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
    out
}

/// Whether `s` begins an HTML entity's name (`lt;`, `#60;`, `#x3c;`).
fn entity_at(s: &str) -> bool {
    let Some(end) = s.find(';').filter(|&e| (1..=32).contains(&e)) else { return false };
    let name = &s[..end];
    match name.strip_prefix('#') {
        Some(n) => n.strip_prefix(['x', 'X']).map_or(!n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()), |h| {
            !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit())
        }),
        None => name.bytes().all(|c| c.is_ascii_alphanumeric()),
    }
}

/// A cell: markup and pipes escaped, line breaks flattened.
fn cell(s: &str) -> String {
    md(s).replace('|', "\\|").replace('\n', " ")
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
    writeln!(out, "# {}", md(&doc.title))?;
    for c in &doc.chapters {
        writeln!(out, "\n## {}\n\n{}", md(&c.title), md(&c.subtitle))?;
        for s in &c.sections {
            writeln!(out, "\n### {}", md(&s.title))?;
            // Consecutive preformatted blocks (episode verdicts) make one.
            let mut code: Vec<&str> = Vec::new();
            for b in &s.blocks {
                if let Block::Code(lines) = b {
                    code.extend(lines.iter().map(String::as_str));
                    continue;
                }
                flush(out, &mut code)?;
                match b {
                    Block::Para(p) => writeln!(out, "\n{}", md(p))?,
                    Block::Verdict { outcome, text, details } => {
                        writeln!(out, "\n**{}**: {}", outcome.as_str().to_uppercase(), md(text))?;
                        if !details.is_empty() {
                            writeln!(out)?;
                        }
                        for (line, subs) in details {
                            writeln!(out, "- {}", md(line).replace('\n', " "))?;
                            for s in subs {
                                writeln!(out, "  - {}", md(s).replace('\n', " "))?;
                            }
                        }
                    }
                    Block::FigureData(t) => table(out, t)?,
                    Block::Warning { serious, message, fix } => {
                        let kind = if *serious { "**warning:**" } else { "note:" };
                        writeln!(out, "\n- {kind} {} (fix: {})", md(message), md(fix))?
                    }
                    Block::Table(t) => table(out, t)?,
                    Block::List(items) => {
                        writeln!(out)?;
                        for (i, item) in items.iter().enumerate() {
                            writeln!(out, "{}. {}", i + 1, md(item).replace('\n', " "))?;
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
    // A fence longer than any run of backticks inside: no line ends it.
    let longest = code.iter().flat_map(|l| l.split(|c| c != '`')).map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    writeln!(out, "\n{fence}")?;
    for l in code.drain(..) {
        writeln!(out, "{l}")?;
    }
    writeln!(out, "{fence}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::doc::{Chapter, Section};
    use super::*;

    /// An imported run's text is shown, not run: markup escaped in text
    /// and tables, and a code block's fence outlasts any backticks in it.
    #[test]
    fn imported_markup_is_escaped() {
        let evil = "<script>alert(1)</script> & <img src=x onerror=alert(2)>";
        let doc = Doc {
            title: evil.into(),
            chapters: vec![Chapter {
                id: "c".into(),
                title: evil.into(),
                subtitle: evil.into(),
                sections: vec![Section {
                    id: "s".into(),
                    title: evil.into(),
                    blocks: vec![
                        Block::Para(evil.into()),
                        Block::Table(Table {
                            head: vec![evil.into()],
                            rows: vec![vec![evil.into()]],
                            ..Default::default()
                        }),
                        Block::List(vec![evil.into()]),
                        Block::Code(vec!["```".into(), evil.into()]),
                    ],
                    open: true,
                }],
            }],
        };
        let mut out = Vec::new();
        write_doc(&doc, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let outside_code: String = text.split("````").step_by(2).collect();
        assert!(!outside_code.contains("<script>") && !outside_code.contains("<img"), "{text}");
        assert!(text.contains("&lt;script>alert(1)&lt;/script> & &lt;img src=x"), "{text}");
        assert_eq!(
            md("R <= D, a < b, 1 && 2, &amp; &#60; &#x3c; <!-- <?x"),
            "R <= D, a < b, 1 && 2, &amp;amp; &amp;#60; &amp;#x3c; &lt;!-- &lt;?x"
        );
        assert!(text.contains("\n````\n```\n"), "the fence is longer than the backticks inside: {text}");
    }
}
