//! Text for a terminal: lines wrapped at the width the summary and the
//! detail tables of `rtscope run` keep to.

/// The width the terminal output keeps to.
pub const WIDTH: usize = 100;

/// `text` wrapped at [`WIDTH`]: the first line after `first` (a label
/// padded to `indent`), the others indented by `indent`.
pub fn wrap(first: &str, text: &str, indent: usize) -> String {
    let mut out = format!("{first:<indent$}");
    let mut col = indent;
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
    out
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
            out.push_str(wrap("", body, indent + 4).trim_start());
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
    }
}
