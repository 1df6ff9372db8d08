//! The whole traced window as a timeline, not only the episodes: what ran
//! on each traced CPU (task slices from `sched_switch`), its hard IRQs and
//! softirqs, the wake-ups, and the probe's samples or the watched threads'
//! activations. Folded by the trace reader into [`Item`]s a few words each,
//! grouped in spans of [`Timeline::SPAN_NS`]; past [`Timeline::MAX_ITEMS`]
//! the spans farthest from the worst samples are let go, so a long run keeps
//! the neighbourhoods of its worst episodes and says what it did not keep.
//! Stored with the run (`run_data` "timeline"), exported to Perfetto; while
//! folding, its settled spans are stored as [`Part`]s, so a run killed
//! before its end keeps them.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Which track of a CPU an item belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Track {
    /// A task on the CPU (`pid`: its thread id), from one `sched_switch`
    /// to the next; the idle task is not kept.
    Task,
    /// A hard interrupt: a device's (`pid`: its IRQ number) or an interrupt
    /// vector's (the local timer, rescheduling IPIs; `pid` -1).
    Irq,
    /// A softirq (`pid`: its vector).
    Softirq,
    /// An instant: a task woken (`sched_waking`, `pid`: the woken thread).
    Wake,
    /// A probe's sample from its programmed time to its wake-up, or a
    /// watched thread's activation from its release to its end (`pid`: the
    /// thread; `value_ns`: the latency, or the response).
    Period,
}

/// One slice (or, on [`Track::Wake`], one instant) of the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ItemRow", into = "ItemRow")]
pub struct Item {
    pub cpu: u32,
    pub track: Track,
    /// CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    pub dur_ns: u64,
    /// An index into [`Timeline::names`].
    pub name: u32,
    pub pid: i32,
    pub value_ns: u64,
}

/// An item as stored: an array, not an object (a run holds many).
#[derive(Serialize, Deserialize)]
struct ItemRow(u32, Track, u64, u64, u32, i32, #[serde(default)] u64);

impl From<ItemRow> for Item {
    fn from(r: ItemRow) -> Item {
        Item { cpu: r.0, track: r.1, start_ns: r.2, dur_ns: r.3, name: r.4, pid: r.5, value_ns: r.6 }
    }
}

impl From<Item> for ItemRow {
    fn from(i: Item) -> ItemRow {
        ItemRow(i.cpu, i.track, i.start_ns, i.dur_ns, i.name, i.pid, i.value_ns)
    }
}

/// The items that start in one span, and the worst sample in or beside it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Its index: it covers `[index * SPAN_NS, (index + 1) * SPAN_NS)`.
    pub index: u64,
    /// The worst sample (latency) that fell in it, ns.
    pub worst_ns: u64,
    pub items: Vec<Item>,
}

/// The traced window's timeline.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timeline {
    pub names: Vec<String>,
    /// The spans kept, in time order.
    pub spans: Vec<Span>,
    /// The first and last times folded (CLOCK_MONOTONIC ns).
    pub window_ns: (u64, u64),
    /// Items folded, and those let go with their spans.
    pub items_seen: u64,
    pub items_dropped: u64,
    pub spans_dropped: u64,
    /// The limit it was kept under.
    pub max_items: u64,
    #[serde(skip)]
    index: HashMap<String, u32>,
    #[serde(skip)]
    open: BTreeMap<u64, Span>,
    #[serde(skip)]
    held: usize,
    /// Which of a process's timelines this is (its [`Part`]s say it).
    #[serde(skip)]
    pub part_id: u64,
    /// The spans changed since the last [`Part`], and the newest span then.
    #[serde(skip)]
    dirty: BTreeSet<u64>,
    #[serde(skip)]
    parted: u64,
}

/// What of a folding timeline settled since its last part: the spans older
/// than [`Timeline::FRESH_SPANS`] new or changed (an item may start in an
/// old span: a long task slice), and those let go. Stored as they come,
/// so that a run killed before its end keeps its timeline up to the last.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// The timeline's [`Timeline::part_id`].
    pub id: u64,
    /// The timeline without its spans: its names, window, counts, limit.
    pub head: Timeline,
    pub spans: Vec<Span>,
    /// The indexes of the spans let go since the last part.
    pub gone: Vec<u64>,
}

/// The next [`Timeline::part_id`].
static NEXT_PART_ID: AtomicU64 = AtomicU64::new(1);

impl Timeline {
    /// Items kept per run: some 45 bytes each in the store, 15 MB; a
    /// wake-up probe at 1 kHz folds about 4 items per period per CPU, so
    /// 300,000 hold some 40 s of two CPUs whole.
    pub const MAX_ITEMS: usize = 300_000;
    /// The unit kept or let go: 100 ms of every traced CPU.
    pub const SPAN_NS: u64 = 100_000_000;
    /// The newest spans are never let go while folding (their samples may
    /// not have been scored yet): the last second.
    const FRESH_SPANS: u64 = 10;

    /// An empty timeline kept under `max_items`.
    pub fn new(max_items: usize) -> Timeline {
        Timeline { max_items: max_items as u64, part_id: NEXT_PART_ID.fetch_add(1, Relaxed), ..Default::default() }
    }

    /// No timeline: folds nothing, parts nothing, and is not stored (a
    /// monitor's: it runs without end).
    pub fn off() -> Timeline {
        Timeline::new(0)
    }

    /// Whether it is [`Timeline::off`].
    pub fn is_off(&self) -> bool {
        self.max_items == 0
    }

    /// What settled since the last part, when a second's spans or more
    /// have: None otherwise, or when nothing changed.
    pub fn part(&mut self) -> Option<Part> {
        let newest = self.open.keys().next_back().copied()?;
        if newest < self.parted + Self::FRESH_SPANS {
            return None;
        }
        self.parted = newest;
        let settled: Vec<u64> = self.dirty.range(..=newest.saturating_sub(Self::FRESH_SPANS)).copied().collect();
        let (mut spans, mut gone) = (Vec::new(), Vec::new());
        for index in settled {
            self.dirty.remove(&index);
            match self.open.get(&index) {
                Some(s) if !s.items.is_empty() => spans.push(s.clone()),
                _ => gone.push(index),
            }
        }
        if spans.is_empty() && gone.is_empty() {
            return None;
        }
        let head = Timeline {
            names: self.names.clone(),
            window_ns: self.window_ns,
            items_seen: self.items_seen,
            items_dropped: self.items_dropped,
            spans_dropped: self.spans_dropped,
            max_items: self.max_items,
            ..Default::default()
        };
        Some(Part { id: self.part_id, head, spans, gone })
    }

    /// A timeline put back together from its stored parts (`head` the
    /// last one's, `spans` the last of each), kept under its limit.
    pub fn from_parts(head: Timeline, spans: Vec<Span>) -> Timeline {
        let mut t = head;
        t.open = spans.into_iter().map(|s| (s.index, s)).collect();
        t.held = t.open.values().map(|s| s.items.len()).sum();
        t.finish()
    }

    /// The index of `name` in [`Timeline::names`], added when new.
    pub fn name(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }

    /// One more item; past the limit, the spans farthest from the worst
    /// samples go.
    pub fn push(&mut self, item: Item) {
        if self.is_off() {
            return;
        }
        self.items_seen += 1;
        let (a, b) = self.window_ns;
        let end = item.start_ns + item.dur_ns;
        self.window_ns = if self.items_seen == 1 { (item.start_ns, end) } else { (a.min(item.start_ns), b.max(end)) };
        let index = item.start_ns / Self::SPAN_NS;
        self.open.entry(index).or_insert_with(|| Span { index, ..Default::default() }).items.push(item);
        self.dirty.insert(index);
        self.held += 1;
        if self.held > self.max_items as usize {
            self.shed(Self::FRESH_SPANS);
            // Over a second's events beyond the limit: the newest span
            // alone is spared, so memory stays bounded.
            if self.held > 4 * self.max_items as usize {
                self.shed(1);
            }
        }
    }

    /// A sample of `value_ns` at `t_ns` (a latency): the span it fell in
    /// is worth keeping by as much.
    pub fn score(&mut self, t_ns: u64, value_ns: u64) {
        if self.is_off() {
            return;
        }
        let index = t_ns / Self::SPAN_NS;
        let s = self.open.entry(index).or_insert_with(|| Span { index, ..Default::default() });
        s.worst_ns = s.worst_ns.max(value_ns);
    }

    /// Lets spans go until the items held fit the limit: those whose worst
    /// sample, and their neighbours', is the least; the older first among
    /// equals. The newest `fresh` spans stay (none when 0).
    fn shed(&mut self, fresh: u64) {
        let newest = self.open.keys().next_back().copied().unwrap_or(0);
        while self.held > self.max_items as usize {
            let worth = |i: u64| self.open.get(&i).map_or(0, |s| s.worst_ns);
            let Some(victim) = self
                .open
                .values()
                .filter(|s| fresh == 0 || s.index + fresh <= newest)
                .filter(|s| !s.items.is_empty())
                .min_by_key(|s| (worth(s.index.wrapping_sub(1)).max(s.worst_ns).max(worth(s.index + 1)), s.index))
                .map(|s| s.index)
            else {
                return;
            };
            let s = self.open.get_mut(&victim).expect("found above");
            self.held -= s.items.len();
            self.items_dropped += s.items.len() as u64;
            self.spans_dropped += 1;
            // The score stays: its neighbours are still beside a bad sample.
            s.items = Vec::new();
            self.dirty.insert(victim);
        }
    }

    /// Done folding: the spans kept in time order, each span's items in
    /// time order.
    pub fn finish(mut self) -> Timeline {
        self.shed(0);
        self.spans = std::mem::take(&mut self.open)
            .into_values()
            .filter(|s| !s.items.is_empty())
            .map(|mut s| {
                s.items.sort_by_key(|i| (i.start_ns, i.cpu));
                s
            })
            .collect();
        self
    }

    /// Another cell's timeline added (the same run, another time), the
    /// names of its items mapped to this one's; the limit kept over both.
    pub fn absorb(&mut self, other: Timeline) {
        if self.index.len() != self.names.len() {
            self.index = self.names.iter().enumerate().map(|(i, n)| (n.clone(), i as u32)).collect();
        }
        let map: Vec<u32> = other.names.iter().map(|n| self.name(n)).collect();
        let (a, b) = other.window_ns;
        self.window_ns = if self.items_seen == 0 { (a, b) } else { (self.window_ns.0.min(a), self.window_ns.1.max(b)) };
        self.items_seen += other.items_seen;
        self.items_dropped += other.items_dropped;
        self.spans_dropped += other.spans_dropped;
        self.max_items = self.max_items.max(other.max_items);
        self.open = std::mem::take(&mut self.spans).into_iter().map(|s| (s.index, s)).collect();
        for mut s in other.spans {
            for i in &mut s.items {
                i.name = map.get(i.name as usize).copied().unwrap_or(i.name);
            }
            let into = self.open.entry(s.index).or_insert_with(|| Span { index: s.index, ..Default::default() });
            into.worst_ns = into.worst_ns.max(s.worst_ns);
            into.items.append(&mut s.items);
        }
        self.held = self.open.values().map(|s| s.items.len()).sum();
        *self = std::mem::take(self).finish();
    }

    /// Every item kept, in time order per span.
    pub fn items(&self) -> impl Iterator<Item = &Item> {
        self.spans.iter().flat_map(|s| &s.items)
    }

    /// The name of an item.
    pub fn name_of(&self, item: &Item) -> &str {
        self.names.get(item.name as usize).map_or("?", String::as_str)
    }

    /// Whether spans were let go.
    pub fn cut(&self) -> bool {
        self.items_dropped > 0
    }

    /// The spans kept, consecutive ones joined: `(start_ns, end_ns)`.
    pub fn kept_ranges(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for s in &self.spans {
            let (a, b) = (s.index * Self::SPAN_NS, (s.index + 1) * Self::SPAN_NS);
            match out.last_mut() {
                Some(last) if last.1 == a => last.1 = b,
                _ => out.push((a, b)),
            }
        }
        out
    }

    /// What was not kept, in words; None when the whole window is.
    pub fn cut_note(&self) -> Option<String> {
        if !self.cut() {
            return None;
        }
        let kept: u64 = self.kept_ranges().iter().map(|r| r.1 - r.0).sum();
        let window = self.window_ns.1.saturating_sub(self.window_ns.0);
        Some(format!(
            "the traced window's timeline ({:.1} s, {} items) is over the limit of {} items: it keeps the {} ms \
             spans around the worst samples ({:.1} s in {} ranges) and let {} spans ({} items) go",
            window as f64 / 1e9,
            self.items_seen,
            self.max_items,
            Self::SPAN_NS / 1_000_000,
            kept as f64 / 1e9,
            self.kept_ranges().len(),
            self.spans_dropped,
            self.items_dropped
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(t: &mut Timeline, start_ns: u64) {
        let name = t.name("spin");
        t.push(Item { cpu: 1, track: Track::Task, start_ns, dur_ns: 1_000, name, pid: 7, value_ns: 0 });
    }

    /// Within the limit the whole window is kept, in time order, and
    /// survives the store's JSON.
    #[test]
    fn the_whole_window_within_the_limit() {
        let mut t = Timeline::new(100);
        for ms in [5u64, 250, 120, 3] {
            task(&mut t, ms * 1_000_000);
        }
        let t = t.finish();
        let starts: Vec<u64> = t.items().map(|i| i.start_ns / 1_000_000).collect();
        assert_eq!(starts, [3, 5, 120, 250]);
        assert_eq!((t.items_seen, t.items_dropped, t.cut_note()), (4, 0, None));
        assert_eq!(t.window_ns, (3_000_000, 250_001_000));
        assert_eq!(t.kept_ranges(), [(0, 300_000_000)]);
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.contains(r#"[1,"task",3000000,1000,0,7,0]"#), "{json}");
        let back: Timeline = serde_json::from_str(&json).unwrap();
        assert_eq!(back.items().count(), 4);
        assert_eq!(back.name_of(back.items().next().unwrap()), "spin");
    }

    /// An off timeline (a monitor's) folds nothing and parts nothing.
    #[test]
    fn off_keeps_nothing() {
        let mut t = Timeline::off();
        for ms in 0..3_000u64 {
            task(&mut t, ms * 1_000_000);
            t.score(ms * 1_000_000, 5);
        }
        assert!(t.part().is_none());
        let t = t.finish();
        assert!(t.is_off() && t.items().next().is_none() && t.items_seen == 0);
    }

    /// Over the limit, the spans around the worst samples stay (a span's
    /// neighbours too), the others go oldest first, and it says so.
    #[test]
    fn over_the_limit_the_worst_neighbourhoods_stay() {
        let mut t = Timeline::new(200);
        // 40 spans of 100 ms, 10 items each; a bad sample in span 4 and a
        // worse one in span 20.
        for span in 0..40u64 {
            for k in 0..10 {
                task(&mut t, span * Timeline::SPAN_NS + k * 1_000_000);
            }
            if span == 4 {
                t.score(span * Timeline::SPAN_NS + 50_000_000, 80_000);
            }
            if span == 20 {
                t.score(span * Timeline::SPAN_NS + 10, 300_000);
            }
        }
        let t = t.finish();
        let kept: Vec<u64> = t.spans.iter().map(|s| s.index).collect();
        // The worst samples' spans and their neighbours; then the newest.
        assert_eq!(kept, [vec![3, 4, 5, 19, 20, 21], (26..40).collect()].concat());
        assert_eq!((t.items_seen, t.items_dropped, t.spans_dropped), (400, 200, 20));
        assert_eq!(
            t.kept_ranges(),
            [(300_000_000, 600_000_000), (1_900_000_000, 2_200_000_000), (2_600_000_000, 4_000_000_000)]
        );
        let note = t.cut_note().unwrap();
        assert!(note.contains("over the limit of 200 items") && note.contains("2.0 s in 3 ranges"), "{note}");
    }

    /// Parts, applied in order (a span's last part replaces its earlier
    /// ones; a span let go is said gone), put back together what the
    /// timeline holds of its settled spans: a late item in an old span and
    /// the spans shed over the limit too.
    #[test]
    fn parts_hold_the_settled_spans() {
        let mut t = Timeline::new(15);
        let mut stored: std::collections::BTreeMap<u64, Span> = Default::default();
        let mut last = None;
        for span in 0..40u64 {
            task(&mut t, span * Timeline::SPAN_NS + 1);
            if span == 12 {
                task(&mut t, 2 * Timeline::SPAN_NS + 5);
            }
            if let Some(p) = t.part() {
                for g in &p.gone {
                    stored.remove(g);
                }
                stored.extend(p.spans.into_iter().map(|s| (s.index, s)));
                last = Some((p.head, t.clone()));
            }
        }
        // The last part at the 31st span: the spans up to the 21st settled.
        let (head, then) = last.unwrap();
        assert_eq!((head.items_seen, head.items_dropped), (32, 17));
        let back = Timeline::from_parts(head, stored.into_values().collect());
        let settled = |t: &Timeline| -> Vec<u64> {
            t.items().map(|i| i.start_ns / Timeline::SPAN_NS).filter(|&s| s <= 20).collect()
        };
        assert_eq!(settled(&back), settled(&then.finish()));
        assert_eq!(settled(&back), (16..=20).collect::<Vec<u64>>());
    }

    /// Two cells' timelines: one, names merged, under the larger limit.
    #[test]
    fn cells_add_up() {
        let mut a = Timeline::new(100);
        task(&mut a, 1_000);
        let mut b = Timeline::new(100);
        let n = b.name("irq/9");
        b.push(Item {
            cpu: 0,
            track: Track::Irq,
            start_ns: 5 * Timeline::SPAN_NS,
            dur_ns: 10,
            name: n,
            pid: 9,
            value_ns: 0,
        });
        task(&mut b, 5 * Timeline::SPAN_NS + 1);
        let mut a = a.finish();
        a.absorb(b.finish());
        let names: Vec<&str> = a.items().map(|i| a.name_of(i)).collect();
        assert_eq!(names, ["spin", "irq/9", "spin"]);
        assert_eq!((a.items_seen, a.window_ns.0), (3, 1_000));
    }
}
