//! A report as a document, independent of its format: sections of
//! paragraphs, tables, verdicts, warnings and figures. The HTML and the
//! Markdown writers render the same document, so they never disagree.

/// How a verdict came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    NotEnoughData,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::NotEnoughData => "not enough data",
        }
    }
}

/// A table: a header row, rows of cells, which columns are numbers (right-aligned).
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub head: Vec<String>,
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table whose first `text_cols` columns are text and the rest numbers.
    pub fn new(head: Vec<String>, text_cols: usize) -> Table {
        let numeric = (0..head.len()).map(|i| i >= text_cols).collect();
        Table { head, numeric, rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

#[derive(Clone, Debug)]
pub enum Block {
    Para(String),
    /// A requirement's outcome and its evidence: the requirement, and lines
    /// under it (evidence, confidence, how long to measure), each with its
    /// own sub-items (the reasons that limit the confidence).
    Verdict {
        outcome: Outcome,
        text: String,
        details: Vec<(String, Vec<String>)>,
    },
    /// A tuning warning (serious) or note, with its fix.
    Warning {
        serious: bool,
        message: String,
        fix: String,
    },
    Table(Table),
    /// An inline SVG with its caption; Markdown leaves the plot out.
    Figure {
        svg: String,
        caption: String,
    },
    /// The data of the figure before it, for a format without plots
    /// (Markdown); the HTML shows the figure instead.
    FigureData(Table),
    /// Preformatted lines (episode verdicts).
    Code(Vec<String>),
    /// A run of small figures side by side (one per CPU or metric).
    Figures(Vec<String>, String),
    /// A numbered list (what to do next).
    List(Vec<String>),
}

/// A titled section; `id` is unique within the document (an anchor).
#[derive(Clone, Debug)]
pub struct Section {
    pub id: String,
    pub title: String,
    pub blocks: Vec<Block>,
    /// Shown open (the summary); the HTML collapses every other section
    /// under its title.
    pub open: bool,
}

impl Section {
    pub fn new(id: impl Into<String>, title: impl Into<String>) -> Section {
        Section { id: id.into(), title: title.into(), blocks: Vec::new(), open: false }
    }

    pub fn push(&mut self, b: Block) {
        self.blocks.push(b);
    }
}

/// One run's chapter, or a comparison's.
#[derive(Clone, Debug)]
pub struct Chapter {
    pub id: String,
    pub title: String,
    /// One line under the title: what, where, when.
    pub subtitle: String,
    pub sections: Vec<Section>,
}

/// The whole report.
#[derive(Clone, Debug)]
pub struct Doc {
    pub title: String,
    pub chapters: Vec<Chapter>,
}
