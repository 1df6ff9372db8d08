//! Names of user code kept across runs, per build. Parsing a large
//! program's DWARF can take seconds; a program that runs on a machine for
//! months is the same build in every run. An address is kept by its ELF
//! file's build ID and its file offset (position-independent: the same in
//! every process that maps the file, wherever ASLR puts it), so a name
//! found once is found again without opening the file's debug data.
//!
//! One text file per build ID under the cache directory: a header line,
//! then `file-offset(hex) TAB function TAB offset TAB source-file TAB
//! line` per address. The directory is `$RTSCOPE_SYMBOL_CACHE`, else
//! `$XDG_CACHE_HOME/rtscope/symbols`, else `~/.cache/rtscope/symbols`;
//! `RTSCOPE_SYMBOL_CACHE=off` turns the cache off. Files without a build
//! ID are never cached (nothing tells two versions apart), nor addresses
//! that found no name (debug symbols installed later must be read).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The header line of a cache file (its format's version).
const HEADER: &str = "# rtscope symbol cache 1";
/// At most this many names per build are kept.
const MAX_PER_BUILD: usize = 100_000;
/// At most this many builds are kept: a new one removes the oldest.
const MAX_BUILDS: usize = 512;

/// A name kept for one file offset of one build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    pub function: String,
    pub offset: u64,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// The names of the builds this run has met, read from and added to the
/// cache directory.
pub struct SymCache {
    dir: PathBuf,
    builds: HashMap<Vec<u8>, HashMap<u64, Kept>>,
    /// Why the directory could not be written, once (then the cache only
    /// reads).
    pub broken: Option<String>,
    /// Names found in the cache, and added to it, in this run.
    pub hits: u64,
    pub added: u64,
}

impl SymCache {
    /// The cache the environment asks for; None when it is turned off or
    /// there is no home to keep it in.
    pub fn from_env() -> Option<SymCache> {
        let dir = match std::env::var_os("RTSCOPE_SYMBOL_CACHE") {
            Some(v) if v == "off" || v.is_empty() => return None,
            Some(v) => PathBuf::from(v),
            None => match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
                Some(x) => PathBuf::from(x).join("rtscope/symbols"),
                None => {
                    PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".cache/rtscope/symbols")
                }
            },
        };
        Some(SymCache::at(dir))
    }

    /// A cache in `dir` (made when the first name is added).
    pub fn at(dir: impl Into<PathBuf>) -> SymCache {
        SymCache { dir: dir.into(), builds: HashMap::new(), broken: None, hits: 0, added: 0 }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, build: &[u8]) -> PathBuf {
        self.dir.join(hex(build))
    }

    fn build(&mut self, build: &[u8]) -> &mut HashMap<u64, Kept> {
        if !self.builds.contains_key(build) {
            let kept = crate::sys::fs::read_in_steps(&self.path(build)).map(|t| parse(&t)).unwrap_or_default();
            self.builds.insert(build.to_vec(), kept);
        }
        self.builds.get_mut(build).expect("inserted above")
    }

    /// The name kept for `file_offset` of `build`.
    pub fn get(&mut self, build: &[u8], file_offset: u64) -> Option<Kept> {
        let k = self.build(build).get(&file_offset).cloned();
        if k.is_some() {
            self.hits += 1;
        }
        k
    }

    /// Keeps the names of `build` found in this run (its file is appended
    /// to at once: a run that is killed keeps what it added).
    pub fn put(&mut self, build: &[u8], names: &[(u64, Kept)]) {
        let room = MAX_PER_BUILD.saturating_sub(self.build(build).len());
        let mut text = String::new();
        let mut new = Vec::new();
        for (off, k) in names.iter().take(room) {
            if self.build(build).contains_key(off) {
                continue;
            }
            text.push_str(&line(*off, k));
            new.push((*off, k.clone()));
        }
        if new.is_empty() {
            return;
        }
        if self.broken.is_none()
            && let Err(e) = self.append(build, &text)
        {
            self.broken = Some(format!(
                "the symbol cache {} cannot be written ({e}): names are found again in every run \
                 (set RTSCOPE_SYMBOL_CACHE to a writable directory, or to off)",
                self.dir.display()
            ));
        }
        self.added += new.len() as u64;
        self.build(build).extend(new);
    }

    fn append(&self, build: &[u8], text: &str) -> std::io::Result<()> {
        let path = self.path(build);
        let fresh = !path.exists();
        if fresh {
            std::fs::create_dir_all(&self.dir)?;
            self.prune();
        }
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
        let mut all = String::new();
        if fresh {
            all.push_str(HEADER);
            all.push('\n');
        }
        all.push_str(text);
        // One write: another run appending to the same build's file at
        // once cannot split a line.
        f.write_all(all.as_bytes())
    }

    /// Removes the least recently written builds beyond [`MAX_BUILDS`] - 1.
    fn prune(&self) {
        let Ok(list) = std::fs::read_dir(&self.dir) else { return };
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = list
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_hexdigit())))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        if files.len() < MAX_BUILDS {
            return;
        }
        files.sort();
        for (_, p) in &files[..files.len() + 1 - MAX_BUILDS] {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A field without the separators of the format.
fn clean(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

fn line(off: u64, k: &Kept) -> String {
    format!(
        "{off:x}\t{}\t{}\t{}\t{}\n",
        clean(&k.function),
        k.offset,
        k.file.as_deref().map(clean).unwrap_or_default(),
        k.line.map(|l| l.to_string()).unwrap_or_default()
    )
}

/// The names of a cache file; lines that do not parse (a file cut short,
/// another version) are skipped.
fn parse(text: &str) -> HashMap<u64, Kept> {
    if text.lines().next() != Some(HEADER) {
        return HashMap::new();
    }
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split('\t');
            let off = u64::from_str_radix(f.next()?, 16).ok()?;
            let function = f.next().filter(|s| !s.is_empty())?.to_string();
            let offset = f.next()?.parse().ok()?;
            let file = f.next().filter(|s| !s.is_empty()).map(str::to_string);
            let line = match f.next()? {
                "" => None,
                s => Some(s.parse().ok()?),
            };
            f.next().is_none().then_some((off, Kept { function, offset, file, line }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(f: &str, line: Option<u32>) -> Kept {
        Kept { function: f.into(), offset: 3, file: line.map(|_| "main.rs".into()), line }
    }

    #[test]
    fn names_kept_in_one_run_are_found_in_the_next() {
        let dir = std::env::temp_dir().join(format!("rtscope-symcache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let build = [0xab, 0x01, 0xff];
        let mut a = SymCache::at(&dir);
        assert_eq!(a.get(&build, 0x1000), None);
        a.put(&build, &[(0x1000, kept("burst", Some(42))), (0x2000, kept("odd\tname\n", None))]);
        a.put(&build, &[(0x1000, kept("burst", Some(42)))]);
        assert_eq!((a.added, a.broken.as_deref()), (2, None));
        let text = std::fs::read_to_string(dir.join("ab01ff")).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        // A new run (a new cache) reads the file; a line cut short is skipped.
        std::fs::OpenOptions::new().append(true).open(dir.join("ab01ff")).unwrap().write_all(b"3000\tcut").unwrap();
        let mut b = SymCache::at(&dir);
        assert_eq!(b.get(&build, 0x1000), Some(kept("burst", Some(42))));
        assert_eq!(b.get(&build, 0x2000).map(|k| k.function), Some("odd name ".into()));
        assert_eq!(b.get(&build, 0x3000), None);
        assert_eq!(b.get(&[1, 2], 0x1000), None);
        assert_eq!(b.hits, 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_directory_says_so_once_and_still_serves_the_run() {
        let mut c = SymCache::at("/proc/rtscope-no-such-dir");
        c.put(&[1], &[(0x10, kept("f", None))]);
        c.put(&[1], &[(0x20, kept("g", None))]);
        assert!(c.broken.as_deref().is_some_and(|b| b.contains("RTSCOPE_SYMBOL_CACHE")), "{:?}", c.broken);
        assert_eq!(c.get(&[1], 0x20).map(|k| k.function), Some("g".into()));
    }

    #[test]
    fn a_file_of_another_format_is_not_read() {
        assert!(parse("1000\tf\t0\t\t\n").is_empty());
        assert_eq!(parse(&format!("{HEADER}\n1000\tf\t0\t\t\nzz\tg\t0\t\t\n")).len(), 1);
    }
}
