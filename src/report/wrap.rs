//! Text for a terminal: lines wrapped at the width the summary and the
//! detail tables of `rtscope run` keep to.

/// The width the terminal output keeps to.
pub const WIDTH: usize = 100;

/// `text` wrapped at [`WIDTH`]: the first line after `first` (a label
/// padded to `indent`), the others indented by `indent`.
pub fn wrap(first: &str, text: &str, indent: usize) -> String {
    let mut out = format!("{first:<indent$}");
    words(&mut out, indent, text, indent);
    out
}

/// `text` wrapped at [`WIDTH`] with a hanging indent: its first line goes
/// on from column `col` (what the line holds already), the others are
/// indented by `indent`.
pub fn hanging(text: &str, col: usize, indent: usize) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    words(&mut out, col, text, indent);
    out
}

/// `text` wrapped at [`WIDTH`] between its fields (the parts `sep` joins,
/// as a title's " · "), each field kept whole on a line where it fits, the
/// next lines indented by `indent`; a field wider than a line is wrapped
/// at its spaces.
pub fn fields(text: &str, sep: &str, indent: usize) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut col = 0;
    for (i, field) in text.split(sep).enumerate() {
        let w = field.chars().count();
        // A field that fits neither here nor on a line of its own goes on
        // here, wrapped at its spaces.
        if i > 0 && (col + sep.chars().count() + w <= WIDTH || indent + w > WIDTH) {
            out.push_str(sep);
            col += sep.chars().count();
        } else if i > 0 {
            out.push_str(sep.trim_end());
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
        }
        let part = hanging(field, col, indent);
        col = match part.rsplit_once('\n') {
            Some((_, last)) => last.chars().count(),
            None => col + w,
        };
        out.push_str(&part);
    }
    out
}

/// `text`'s words onto `out`, whose line is at column `col`, a line broken
/// before a word that would pass [`WIDTH`], the next indented by `indent`.
fn words(out: &mut String, mut col: usize, text: &str, indent: usize) {
    for (i, word) in text.split(' ').enumerate() {
        let w = word.chars().count();
        if i > 0 && col + 1 + w > WIDTH {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
        } else if i > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += w;
    }
}

/// `text`'s lines each within [`WIDTH`]: a longer one broken at its
/// spaces, the rest indented 4 past the line's own indent.
pub fn fit(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        if line.chars().count() <= WIDTH {
            out.push_str(line);
        } else {
            out.push_str(&" ".repeat(indent));
            out.push_str(&hanging(body, indent, indent + 4));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn fit_breaks_only_the_long_lines_under_their_indent() {
        let long = format!("  {}", "word ".repeat(40).trim_end());
        let got = super::fit(&format!("short\n{long}\n"));
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines[0], "short");
        assert!(lines.len() > 2 && lines.iter().all(|l| l.chars().count() <= super::WIDTH), "{got}");
        assert!(lines[1].starts_with("  word") && lines[2].starts_with("      word"), "{got}");
        // The first line fills to the width, as the others do.
        assert_eq!(lines[1].chars().count(), 96, "{got}");
    }

    #[test]
    fn a_title_breaks_between_its_fields() {
        let title = format!("rtscope noise · run 5 · {} · gap > 1us · 1.636s", "x".repeat(70));
        let got = super::fields(&title, " · ", 2);
        assert_eq!(got, format!("rtscope noise · run 5 · {} ·\n  gap > 1us · 1.636s", "x".repeat(70)), "{got}");
        let got = super::fields("short · title", " · ", 2);
        assert_eq!(got, "short · title");
        // A field wider than a line is wrapped at its spaces.
        let long = format!("a · {}", "word ".repeat(30).trim_end());
        let got = super::fields(&long, " · ", 2);
        assert!(got.lines().count() == 2 && got.lines().all(|l| l.chars().count() <= super::WIDTH), "{got}");
    }

    #[test]
    fn a_hanging_indent_fills_the_first_line_from_its_column() {
        let text = "abcd ".repeat(30);
        let got = super::hanging(text.trim_end(), 0, 2);
        let lines: Vec<&str> = got.lines().collect();
        // 20 words of 4 and their 19 spaces: 99 columns; the next would pass 100.
        assert_eq!((lines[0].chars().count(), lines[1].chars().count()), (99, 51), "{got}");
        assert!(lines[1].starts_with("  abcd"), "{got}");
        let got = super::hanging(text.trim_end(), 10, 2);
        assert_eq!(got.lines().next().unwrap().chars().count(), 89, "from column 10: {got}");
    }
}
