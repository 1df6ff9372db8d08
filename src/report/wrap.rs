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
