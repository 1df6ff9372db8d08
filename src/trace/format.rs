//! The layouts tracefs publishes: each event's `format` file (field names,
//! offsets and sizes of its binary record) and `events/header_page` (the
//! layout of a ring-buffer page). Records are decoded with these, never by
//! parsing the text `trace` output, so a kernel that adds or moves a field
//! is read correctly.

/// One field of an event record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `__data_loc` field: a u32 holding (length << 16 | offset) of the data.
    pub data_loc: bool,
}

/// An event's `format` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    pub name: String,
    pub id: u16,
    pub fields: Vec<Field>,
}

impl Format {
    /// Parses the text of `events/<system>/<name>/format`.
    pub fn parse(text: &str) -> Result<Format, String> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(n) = line.strip_prefix("name:") {
                name = Some(n.trim().to_string());
            } else if let Some(i) = line.strip_prefix("ID:") {
                id = Some(i.trim().parse::<u16>().map_err(|_| format!("bad ID line '{line}'"))?);
            } else if line.starts_with("field:") {
                fields.push(parse_field(line)?);
            }
        }
        Ok(Format { name: name.ok_or("no 'name:' line")?, id: id.ok_or("no 'ID:' line")?, fields })
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// `field:TYPE NAME[N]; offset:O; size:S; signed:X;` (tab-separated)
fn parse_field(line: &str) -> Result<Field, String> {
    let mut parts = line.split(';').map(str::trim);
    let decl = parts.next().and_then(|d| d.strip_prefix("field:")).ok_or_else(|| format!("bad field '{line}'"))?;
    let decl = decl.trim();
    let last = decl.rsplit(|c: char| c.is_whitespace()).next().unwrap_or(decl);
    let name = last.split('[').next().unwrap_or(last).to_string();
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for p in parts {
        if let Some(v) = p.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    Ok(Field {
        name,
        offset: offset.ok_or_else(|| format!("no offset in '{line}'"))?,
        size: size.ok_or_else(|| format!("no size in '{line}'"))?,
        signed,
        data_loc: decl.starts_with("__data_loc"),
    })
}

/// The layout of one ring-buffer page (sub-buffer) from `header_page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageLayout {
    pub timestamp_offset: usize,
    pub commit_offset: usize,
    pub commit_size: usize,
    pub data_offset: usize,
    /// Header plus data: what one read of `trace_pipe_raw` returns at most.
    pub page_size: usize,
}

impl PageLayout {
    /// x86-64's `header_page`: the layout until the kernel's own is read.
    pub const X86_64: PageLayout =
        PageLayout { timestamp_offset: 0, commit_offset: 8, commit_size: 8, data_offset: 16, page_size: 4096 };

    pub fn parse(text: &str) -> Result<PageLayout, String> {
        let mut fields = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| l.starts_with("field:")) {
            fields.push(parse_field(line)?);
        }
        let get =
            |n: &str| fields.iter().find(|f| f.name == n).ok_or_else(|| format!("header_page has no '{n}' field"));
        let (ts, commit, data) = (get("timestamp")?, get("commit")?, get("data")?);
        if ts.size != 8 || !(commit.size == 4 || commit.size == 8) {
            return Err(format!("unexpected header_page sizes: timestamp {}, commit {}", ts.size, commit.size));
        }
        Ok(PageLayout {
            timestamp_offset: ts.offset,
            commit_offset: commit.offset,
            commit_size: commit.size,
            data_offset: data.offset,
            page_size: data.offset + data.size,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn data(name: &str) -> String {
        std::fs::read_to_string(format!("{}/tests/data/trace/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn parses_this_kernels_formats() {
        let f = Format::parse(&data("format/sched.sched_switch")).unwrap();
        assert_eq!(f.name, "sched_switch");
        assert_eq!(f.id, 372);
        let next = f.field("next_comm").unwrap();
        assert_eq!((next.offset, next.size, next.signed), (40, 16, false));
        assert_eq!(f.field("prev_state").unwrap().size, 8);
        assert_eq!(f.field("common_pid").unwrap().offset, 4);
        let irq = Format::parse(&data("format/irq.irq_handler_entry")).unwrap();
        let name = irq.field("name").unwrap();
        assert!(name.data_loc && name.offset == 12 && name.size == 4);
        assert!(!irq.field("irq").unwrap().data_loc && irq.field("irq").unwrap().signed);
        assert!(Format::parse("name: x\nformat:\n").is_err());
    }

    #[test]
    fn parses_header_page() {
        let l = PageLayout::parse(&data("header_page")).unwrap();
        assert_eq!(l, PageLayout::X86_64);
    }
}
