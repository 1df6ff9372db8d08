//! The comparison's statistics on known inputs, and whole comparisons.
use super::*;

fn tally(values: impl IntoIterator<Item = u64>) -> Tally {
    let mut t = Tally::new();
    for v in values {
        t.record(v);
    }
    t
}

/// Deterministic pseudo-latencies: 10 us plus an exponential tail of
/// mean `tail_ns`.
fn latencies(n: usize, tail_ns: f64, seed: u64) -> Tally {
    let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    tally((0..n).map(|_| 10_000 + (-rng.uniform().ln() * tail_ns) as u64))
}

#[test]
fn ranks_agree_with_the_tallys_quantiles() {
    let t = latencies(50_000, 3_000.0, 1);
    let r = Ranks::new(&t);
    assert_eq!(r.count(), 50_000);
    for q in [0.0, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
        assert_eq!(r.quantile(q), t.quantile(q), "q {q}");
    }
    assert_eq!(r.at_rank(u64::MAX), t.max());
    assert!((r.value(Figure::Mean) - t.mean()).abs() < 1e-6);
    // Overflows are the largest samples, at the exact maximum.
    let o = tally([5, 6, 200_000_000_000]);
    assert_eq!(Ranks::new(&o).quantile(1.0), 200_000_000_000);
    assert_eq!(Ranks::new(&o).quantile(0.5), 6);
}

#[test]
fn signed_tallies_rank_their_negative_values_first() {
    let mut t = Tally::new_signed();
    for v in [-3_000i64, -1_000, 500, 2_000] {
        t.record_signed(v);
    }
    let r = Ranks::new(&t);
    assert_eq!(r.count(), 4);
    for q in [0.25, 0.5, 0.75, 1.0] {
        assert_eq!(r.quantile(q), t.quantile(q), "q {q}");
    }
}

#[test]
fn samplers_have_the_right_moments() {
    let mut rng = Rng::new(7);
    let n = 20_000;
    let g: Vec<f64> = (0..n).map(|_| rng.gamma(3.0)).collect();
    let mean = g.iter().sum::<f64>() / n as f64;
    assert!((mean - 3.0).abs() < 0.06, "gamma mean {mean}");
    let small: f64 = (0..n).map(|_| rng.gamma(0.5)).sum::<f64>() / n as f64;
    assert!((small - 0.5).abs() < 0.03, "gamma(0.5) mean {small}");
    let b: f64 = (0..n).map(|_| rng.beta(2.0, 6.0)).sum::<f64>() / n as f64;
    assert!((b - 0.25).abs() < 0.01, "beta mean {b}");
    let z: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
    let var = z.iter().map(|x| x * x).sum::<f64>() / n as f64;
    assert!((var - 1.0).abs() < 0.05, "normal variance {var}");
}

/// Every figure of two tallies compared by single samples.
fn figures_of(a: &Tally, b: &Tally, rng: &mut Rng) -> Vec<FigureCmp> {
    let (a, b) = (Sample::of(a), Sample::of(b));
    compare_figures(&[Some(&a), Some(&b)], rng)
}

fn figure<'a>(figs: &'a [FigureCmp], name: &str) -> &'a FigureCmp {
    figs.iter().find(|f| f.figure == name).unwrap()
}

#[test]
fn intervals_hold_one_for_samples_of_one_distribution() {
    // 95 % intervals: about 1 in 20 pairs of same-law samples may
    // miss; 40 pairs with at most 4 misses per figure.
    let mut rng = Rng::new(11);
    let mut same = [0usize; 3];
    for s in 0..40 {
        let figs =
            figures_of(&latencies(20_000, 3_000.0, 2 * s + 100), &latencies(20_000, 3_000.0, 2 * s + 101), &mut rng);
        for (i, name) in ["p50", "p99.9", "mean"].iter().enumerate() {
            let f = figure(&figs, name);
            assert_eq!(f.tests[1], Some(Test::Bootstrap), "{name}");
            same[i] += usize::from(f.changes[1] == Change::WithinNoise);
        }
    }
    assert!(same.iter().all(|&n| n >= 36), "within noise of 40: {same:?}");
}

/// A run whose first series has one interval per tally.
fn run_of(intervals: &[Tally]) -> Run {
    let mut run = crate::store::tests_support::sample_run();
    run.series.truncate(1);
    let ivs = intervals
        .iter()
        .enumerate()
        .map(|(i, t)| {
            crate::run::Interval::new(i as u32, i as u64 * 1_000_000_000, (i as u64 + 1) * 1_000_000_000, t, 0, 0)
        })
        .collect();
    let key = run.series[0].key.clone();
    run.series[0] = Series::new(key, "ns".into(), "adaptive".into(), ivs, vec![]).unwrap();
    run
}

fn run_with(t: &Tally) -> Run {
    run_of(std::slice::from_ref(t))
}

fn gate(pct: f64) -> Gate {
    Gate { max_regression_pct: pct, min_delta_ns: DEFAULT_MIN_DELTA_NS, selectors: vec![], allow_incomplete: false }
}

fn gated(c: &Compared, g: &Gate) -> Vec<Regression> {
    let mut c = c.clone();
    c.gate_rows(g).unwrap();
    regressions(&c, g)
}

#[test]
fn the_same_distribution_is_within_noise_and_a_heavier_tail_is_worse() {
    let a = run_with(&latencies(40_000, 3_000.0, 1));
    let same = run_with(&latencies(40_000, 3_000.0, 2));
    let worse = run_with(&latencies(40_000, 6_000.0, 3));
    let c = compare(&[&a, &same, &worse]);
    let rows = &c.series;
    assert_eq!(rows.len(), 1);
    assert!(rows[0].summary, "a metric's only CPU is its summary row");
    assert_eq!(rows[0].resampled, vec![Some(Resampling::Samples); 3], "one interval: single samples");
    let get = |name: &str| figure(&rows[0].figures, name).clone();
    for name in ["mean", "p50", "p99", "p99.9"] {
        let f = get(name);
        assert_eq!(f.changes[0], Change::Baseline);
        assert_eq!(f.changes[1], Change::WithinNoise, "{name}: {f:?}");
        let [lo, hi] = f.intervals[1].unwrap();
        assert!(lo < 1.0 && hi > 1.0 && hi - lo < 0.3, "{name}: {lo}..{hi}");
        assert_eq!(f.changes[2], Change::Worse, "{name}: {f:?}");
        assert!(f.ratios[2].unwrap() > 1.1, "{name}");
    }
    // p99.99 of 40000 samples has 4 above it, and the maximum is one
    // sample: both go to the exceedance test, which sees the heavier tail.
    for name in ["p99.99", "max"] {
        let f = get(name);
        assert_eq!(f.tests[2], Some(Test::Exceedance), "{name}");
        assert_eq!(f.changes[2], Change::Worse, "{name}: {f:?}");
        assert!(f.p_values[2].unwrap() < 0.01, "{name}: {f:?}");
        assert_ne!(f.changes[1], Change::Worse, "{name}: {f:?}");
    }
    // The gate: a regression beyond the noise and above the limit.
    let r = gated(&c, &gate(20.0));
    assert!(r.iter().any(|r| r.figure == "p99" && r.run == 2 && r.test == Test::Bootstrap), "{r:?}");
    assert!(r.iter().any(|r| r.figure == "max" && r.test == Test::Exceedance), "{r:?}");
    assert!(r.iter().all(|r| r.run == 2));
    assert!(gated(&c, &gate(1000.0)).is_empty());
    // Reversed, the heavier tail is the baseline and the others are better.
    let back = compare(&[&worse, &a]);
    assert_eq!(figure(&back.series[0].figures, "p99").changes[1], Change::Better);
    assert_eq!(figure(&back.series[0].figures, "max").changes[1], Change::Better);
    assert!(gated(&back, &gate(0.0)).is_empty());
    // The bootstrap is seeded: the same comparison gives the same answer.
    assert_eq!(compare(&[&a, &same, &worse]), c);
}

#[test]
fn series_missing_from_a_run_are_marked_and_cpus_merge() {
    let run = crate::store::tests_support::sample_run();
    let mut less = run.clone();
    less.series.truncate(1);
    let rows = compare(&[&run, &less]).series;
    let cpus: Vec<Option<i64>> = rows.iter().map(|r| r.cpu).collect();
    assert!(cpus.contains(&None), "CPUs merged: {cpus:?}");
    assert_eq!(cpus.last(), Some(&None), "the merged row comes last");
    let missing = rows.iter().find(|r| r.cpu.is_some() && r.counts[1].is_none()).unwrap();
    assert!(missing.figures.iter().all(|f| f.changes[1] == Change::Missing));
    let merged = rows.iter().find(|r| r.cpu.is_none()).unwrap();
    assert_eq!(merged.counts[0], Some(run.series.iter().map(|s| s.total().count()).sum()));
    assert_eq!(merged.label(), "wakeup latency all CPUs");
    assert!(merged.summary && rows.iter().filter(|r| r.summary).count() == 1, "only the merged row summarises");
}

/// `n` samples uniform in 10..20 us, and `spikes` at 500 us + i.
fn with_spikes(n: u64, spikes: u64) -> Tally {
    tally((0..n - spikes).map(|i| 10_000 + (i * 7919) % 10_000).chain((0..spikes).map(|i| 500_000 + i * 1_000)))
}

#[test]
fn the_exceedance_test_flags_a_spike_population_and_not_an_outlier() {
    // A: 10000 samples, 10 above its p99.9 (at 20 us).
    let a = Ranks::new(&with_spikes(10_000, 10));
    let p999 = Figure::Quantile(0.999);
    assert_eq!(a.count_above(a.value(p999) as i64), 10);
    // B with 30 above A's p99.9: 40 in all, 30 of them B's where 20
    // are expected (p = 0.002): beyond noise.
    let b = Ranks::new(&with_spikes(10_000, 30));
    let (p, change, t) = tail_test(&a, &b, p999);
    assert_eq!((t.baseline_above, t.above), (10, 30));
    assert!(p < 0.005 && change == Change::Worse, "p {p}");
    // With 12 of 22: p = 0.83, within noise.
    let b = Ranks::new(&with_spikes(10_000, 12));
    let (p, change, t) = tail_test(&a, &b, p999);
    assert_eq!((t.baseline_above, t.above), (10, 12));
    assert!(p > 0.5 && change == Change::WithinNoise, "p {p}");
    // One outlier above A's maximum is as likely as not: p = 1.
    let mut one = with_spikes(10_000, 10);
    one.record(2_000_000);
    let (p, change, t) = tail_test(&a, &Ranks::new(&one), Figure::Max);
    assert_eq!((t.baseline_above, t.above), (0, 1));
    assert_eq!((p, change), (1.0, Change::WithinNoise));
    // Eight above it: p = 2 / 2^8 (B has 18 samples more than A).
    let mut eight = with_spikes(10_000, 10);
    for i in 0..8 {
        eight.record(2_000_000 + i * 10_000);
    }
    let (p, change, _) = tail_test(&a, &Ranks::new(&eight), Figure::Max);
    assert!((p - 2.0 / 256.0).abs() < 1e-4 && change == Change::Worse, "p {p}");
    // The other way round: the baseline had the spikes, the run is better.
    let (p, change, t) = tail_test(&Ranks::new(&eight), &a, Figure::Max);
    assert_eq!((t.baseline_above, t.above), (8, 0));
    assert!(p < 0.01 && change == Change::Better, "p {p}");
    // A run of a tenth the size: its share of the exceedances is 1/11,
    // so 3 of 3 above A's maximum (p = 2 / 11^3) is beyond noise.
    let mut small = with_spikes(1_000, 0);
    for v in [3_000_000, 3_100_000, 3_200_000] {
        small.record(v);
    }
    let (p, change, _) = tail_test(&a, &Ranks::new(&small), Figure::Max);
    assert!(p < 0.002 && change == Change::Worse, "p {p}");
}

#[test]
fn two_counts_is_the_exact_conditional_binomial_test() {
    // 0 against 6 over equal exposures: P(all 6 in b) = 1/64.
    let (up, low) = two_counts(0, 1.0, 6, 1.0);
    assert!((up - 1.0 / 64.0).abs() < 1e-12 && (low - 1.0).abs() < 1e-12, "{up} {low}");
    assert_eq!(counts_verdict(0, 1.0, 6, 1.0).1, Change::Worse);
    assert_eq!(counts_verdict(0, 1.0, 5, 1.0).1, Change::WithinNoise, "1/32 two-sided is 0.0625");
    assert_eq!(counts_verdict(10, 1.0, 12, 1.0).1, Change::WithinNoise);
    assert_eq!(counts_verdict(100, 1.0, 40, 1.0).1, Change::Better);
    // Twice the exposure: 20 against 40 is the same rate.
    let (p, c) = counts_verdict(20, 1.0, 40, 2.0);
    assert!(p > 0.5 && c == Change::WithinNoise, "{p}");
    assert_eq!(two_counts(0, 1.0, 0, 1.0), (1.0, 1.0));
    // Large counts: a 1 % change in a million events is beyond noise.
    assert_eq!(counts_verdict(1_000_000, 1.0, 1_010_000, 1.0).1, Change::Worse);
}

/// A run of `k` intervals whose latencies shift together by a random
/// burst per interval (a noisy neighbour that comes and goes).
fn bursty(k: usize, seed: u64) -> Vec<Tally> {
    let mut rng = Rng::new(seed);
    (0..k)
        .map(|i| {
            let shift = (rng.uniform() * 8_000.0) as u64;
            let t = latencies(1_000, 2_000.0, seed * 1000 + i as u64);
            let mut s = Tally::new();
            for [lo, _, c] in crate::hist::signed_buckets(&t) {
                for _ in 0..c {
                    s.record(lo as u64 + shift);
                }
            }
            s
        })
        .collect()
}

#[test]
fn bursty_runs_are_resampled_by_intervals_and_their_intervals_are_wider() {
    let (mut by_samples, mut by_intervals) = (0, 0);
    for s in 0..10u64 {
        let (a, b) = (run_of(&bursty(12, 2 * s + 1)), run_of(&bursty(12, 2 * s + 2)));
        let row = &compare(&[&a, &b]).series[0];
        assert_eq!(row.resampled, vec![Some(Resampling::Intervals); 2]);
        by_intervals += usize::from(figure(&row.figures, "p50").changes[1] != Change::WithinNoise);
        let ta = a.series[0].total().clone();
        let tb = b.series[0].total().clone();
        let figs = figures_of(&ta, &tb, &mut Rng::new(s));
        by_samples += usize::from(figure(&figs, "p50").changes[1] != Change::WithinNoise);
        // The interval bootstrap's interval holds the sample one's.
        let wide = figure(&row.figures, "p50").intervals[1].unwrap();
        let narrow = figure(&figs, "p50").intervals[1].unwrap();
        assert!(wide[1] - wide[0] > 2.0 * (narrow[1] - narrow[0]), "{wide:?} vs {narrow:?}");
    }
    // Same-law runs: single samples call many of them different, whole
    // intervals about 1 in 20.
    eprintln!("beyond noise of 10 same-law pairs: {by_samples} by samples, {by_intervals} by intervals");
    assert!(by_samples >= 5, "single samples: {by_samples} of 10 beyond noise");
    assert!(by_intervals <= 2, "intervals: {by_intervals} of 10 beyond noise");
}

#[test]
fn blocks_group_long_runs_and_need_enough_intervals() {
    let one = IntervalPoints::of(&tally([1_000, 2_000]));
    assert!(Blocks::new(&vec![one.clone(); MIN_INTERVALS - 1]).is_none());
    let mut sparse = vec![IntervalPoints::default(); 40];
    sparse[..MIN_INTERVALS - 1].fill(one.clone());
    assert!(Blocks::new(&sparse).is_none(), "empty intervals do not count");
    let b = Blocks::new(&vec![one.clone(); 4320]).unwrap();
    assert_eq!((b.len(), b.per_block), (99, 44));
    // The replicates of identical blocks are the blocks' figures.
    let figs = [Figure::Mean, Figure::Quantile(0.5), Figure::Quantile(1.0), Figure::Max];
    let r = b.replicates(&figs, 5, &mut Rng::new(1));
    assert!(r[0].iter().all(|v| (*v - 1_500.0).abs() < 1e-9), "{:?}", r[0]);
    assert!(r[1].iter().all(|v| *v == 1_000.0) && r[2].iter().all(|v| *v == 2_000.0), "{r:?}");
    // Merging the same interval of two CPUs adds their buckets.
    let mut m = one.clone();
    m.merge(&IntervalPoints::of(&tally([1_000, 3_000])));
    assert_eq!(m.points, vec![(1_000, 2), (2_000, 1), (3_000, 1)]);
    assert_eq!((m.n, m.sum), (4, 7_000.0));
}

/// The cumulative table (a binary search per quantile) and the summed
/// counts (a pass over every value) read the same replicates.
#[test]
fn blocks_read_alike_from_the_table_and_the_sums() {
    let intervals: Vec<IntervalPoints> =
        (0..37).map(|i| IntervalPoints::of(&latencies(50 + i * 7, 2_000.0 + i as f64 * 100.0, i as u64))).collect();
    let table = Blocks::new(&intervals).unwrap();
    assert!(table.cum.is_some());
    let mut summed = table.clone();
    summed.cum = None;
    let figs: Vec<Figure> = FIGURES.iter().map(|(_, f)| *f).collect();
    let (a, b) = (table.replicates(&figs, 300, &mut Rng::new(5)), summed.replicates(&figs, 300, &mut Rng::new(5)));
    assert_eq!(a, b);
    assert!(a.iter().all(|r| r.len() == 300) && a[1].iter().any(|v| *v != a[1][0]), "{:?}", a[1]);
}

/// A merged row folded a CPU at a time (each CPU's share of its places,
/// then the shares added) has the blocks of its intervals merged first.
#[test]
fn blocks_folded_per_cpu_equal_those_of_merged_intervals() {
    let cpu = |c: u64| -> Vec<IntervalPoints> {
        (0..230)
            .map(|i| IntervalPoints::of(&latencies(20 + ((i + c) % 9) as usize, 2_000.0 + c as f64 * 300.0, i * 2 + c)))
            .collect()
    };
    let (a, b) = (cpu(0), cpu(1));
    let merged: Vec<IntervalPoints> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| {
            let mut m = x.clone();
            m.merge(y);
            m
        })
        .collect();
    let whole = Blocks::new(&merged).unwrap();
    let mut fold = BlockFold::new(a.len());
    let mut share = BlockFold::new(b.len());
    a.iter().enumerate().for_each(|(at, i)| fold.add(at, i));
    b.iter().enumerate().for_each(|(at, i)| share.add(at, i));
    fold.merge(&share);
    let folded = fold.blocks().unwrap();
    assert_eq!(
        (folded.values.clone(), folded.blocks.clone(), folded.cum.clone()),
        (whole.values, whole.blocks, whole.cum)
    );
    assert_eq!((folded.len(), folded.per_block), (77, 3));
}

#[test]
fn selectors_parse_and_pick_rows() {
    let s = Selector::parse("wakeup.latency.p99.9").unwrap();
    assert!(s.matches("wakeup", "latency", "p99.9", None, true));
    assert!(!s.matches("wakeup", "latency", "p99.9", Some(1), false), "per-CPU rows need a CPU part");
    assert!(s.matches("wakeup", "latency", "p99.9", Some(1), true), "a metric's only CPU is its summary");
    assert!(!s.matches("wakeup", "latency", "p99.99", None, true));
    let s = Selector::parse("netlat.*.max").unwrap();
    assert!(s.matches("netlat", "rx_total", "max", None, true) && !s.matches("netlat", "rx_total", "p99", None, true));
    let s = Selector::parse("wakeup").unwrap();
    assert!(s.matches("wakeup", "irq", "mean", None, true));
    let s = Selector::parse("wakeup.latency.*.cpu*").unwrap();
    assert!(
        s.matches("wakeup", "latency", "p50", Some(3), false) && !s.matches("wakeup", "latency", "p50", None, true)
    );
    let s = Selector::parse("wakeup.latency.max.cpu2").unwrap();
    assert!(
        s.matches("wakeup", "latency", "max", Some(2), false) && !s.matches("wakeup", "latency", "max", Some(3), false)
    );
    let s = Selector::parse("*.*.p99.all").unwrap();
    assert!(s.matches("sleep", "nanosleep_1ms", "p99", None, true));
    for bad in ["", "wakeup..p99", "wakeup.latency.cpu1", "wakeup.latency.max.cpufoo", "a b", "wakeup.latency.p99/"] {
        assert!(Selector::parse(bad).is_err(), "{bad}");
    }
    assert!(glob("p99*", "p99.99") && glob("*", "") && glob("a*b*c", "axxbyyc") && !glob("a*b", "ac"));
}

#[test]
fn the_gate_judges_summary_rows_above_the_floor_and_only_what_is_selected() {
    // Two CPUs; the second run is 1.5 us (15 %) slower on both.
    let two = |shift: u64| {
        let mut run = crate::store::tests_support::sample_run();
        for s in &mut run.series {
            let t = tally((0..20_000u64).map(|i| 10_000 + (i * 7919) % 1_000 + shift));
            let iv = crate::run::Interval::new(0, 0, 1_000_000_000, &t, 0, 0);
            *s = Series::new(s.key.clone(), "ns".into(), "adaptive".into(), vec![iv], vec![]).unwrap();
        }
        run
    };
    let (a, b) = (two(0), two(1_500));
    let c = compare(&[&a, &b]);
    let r = gated(&c, &gate(5.0));
    assert!(!r.is_empty() && r.iter().all(|r| r.series == "wakeup latency all CPUs"), "merged rows only: {r:?}");
    assert!(r.iter().any(|r| r.selector == "wakeup.latency.p50" && r.delta_ns.unwrap() >= 1_000.0), "{r:?}");
    // A floor above the difference: nothing fails.
    assert!(gated(&c, &Gate { min_delta_ns: 2_000, ..gate(5.0) }).is_empty());
    // Selected figures only; per-CPU rows when asked for.
    let only =
        |sel: &[&str]| Gate { selectors: sel.iter().map(|s| Selector::parse(s).unwrap()).collect(), ..gate(5.0) };
    let r = gated(&c, &only(&["wakeup.latency.p50"]));
    assert!(!r.is_empty() && r.iter().all(|r| r.figure == "p50" && r.series.ends_with("all CPUs")), "{r:?}");
    let r = gated(&c, &only(&["wakeup.latency.p50.cpu1"]));
    assert!(!r.is_empty() && r.iter().all(|r| r.selector == "wakeup.latency.p50.cpu1"), "{r:?}");
    let mut unmatched = c.clone();
    let err = unmatched.gate_rows(&only(&["wakeup.latncy"])).unwrap_err();
    assert!(err.contains("--gate wakeup.latncy") && err.contains("wakeup.latency"), "{err}");
}

#[test]
fn counts_are_compared_as_rates_and_gate() {
    let with = |missed: u64, lost: u64| {
        let mut run = crate::store::tests_support::sample_run();
        for (i, s) in run.series.iter_mut().enumerate() {
            s.key.probe = "ptimer".into();
            s.key.metric = "timerfd".into();
            s.extra.insert("missed".into(), (missed * i as u64).into());
        }
        let mut net = run.series[0].clone();
        net.key = crate::run::SeriesKey::new("netlat", "rx_total", 0);
        net.extra.insert("lost".into(), lost.into());
        net.extra.insert("reordered".into(), 0.into());
        let mut net2 = net.clone();
        net2.key.metric = "rx_wake".into();
        run.series.extend([net, net2]);
        run
    };
    let (a, b) = (with(0, 2), with(40, 3));
    let mut c = compare(&[&a, &b]);
    let find = |c: &Compared, fig: &str, cpu: Option<i64>| {
        c.rates.iter().find(|r| r.figure == fig && r.cpu == cpu).cloned().unwrap_or_else(|| panic!("{fig} {cpu:?}"))
    };
    // ptimer missed: 0 and 40 on CPU 1 over 30 s.
    let m = find(&c, "missed", Some(1));
    assert_eq!(m.counts, vec![Some(0), Some(40)]);
    assert!((m.exposure_s[1].unwrap() - 30.0).abs() < 1e-9);
    assert_eq!((m.ratios[1], m.changes[1]), (None, Change::Worse));
    assert!(!m.summary && find(&c, "missed", None).summary);
    // netlat's per-CPU counts once, under `datagrams`, not per metric.
    let lost = find(&c, "lost", Some(0));
    assert_eq!((lost.metric.as_str(), lost.counts.clone()), ("datagrams", vec![Some(2), Some(3)]));
    assert_eq!(lost.changes[1], Change::WithinNoise);
    assert_eq!(c.rates.iter().filter(|r| r.figure == "lost").count(), 1);
    // Overruns: sample_run's intervals have some.
    assert!(c.rates.iter().any(|r| r.figure == "overruns"));
    c.gate_rows(&gate(10.0)).unwrap();
    let r = regressions(&c, &gate(10.0));
    assert!(r.iter().any(|r| r.selector == "ptimer.timerfd.missed" && r.test == Test::Poisson), "{r:?}");
    assert!(r.iter().all(|r| r.figure == "missed"), "{r:?}");
}

#[test]
fn runs_that_did_not_complete_are_named() {
    let a = crate::store::tests_support::sample_run();
    let mut b = a.clone();
    b.header.status = RunStatus::Interrupted;
    assert_eq!(incomplete(&[&a, &b]), vec![(1, RunStatus::Interrupted)]);
    assert!(incomplete(&[&a, &a]).is_empty());
}

#[test]
fn a_watched_threads_row_is_labelled_by_its_thread_id() {
    assert_eq!(super::row_label("watch", "latency", Some(4242), ""), "watch latency tid4242");
    assert_eq!(super::row_label("watch", "latency", None, "cpu"), "watch latency all threads [cpu]");
    assert_eq!(super::row_label("wakeup", "latency", Some(1), ""), "wakeup latency cpu1");
    let key = crate::run::SeriesKey::new("watch", "latency", 4242);
    assert_eq!(key.describe(), "watch/latency thread 4242");
}

/// A run of 2 CPUs of 230 intervals each (blocks of 3), CPU 1 missing
/// every seventh interval (its merged row's places are CPU 0's), with a
/// tail that grows with `tail_ns`, and a signed series of 12 intervals
/// on CPUs 0 and 1 (a merged row by samples, one by intervals).
fn long_run(tail_ns: f64, seed: u64) -> Run {
    let mut run = crate::store::tests_support::sample_run();
    run.header.uuid.push_str(&format!("-long-{seed}"));
    let mut series = Vec::new();
    for cpu in 0..2i64 {
        let ivs = (0..230u64)
            .filter(|i| cpu == 0 || i % 7 != 3)
            .map(|i| {
                let t = latencies(40 + ((i + cpu as u64) % 11) as usize, tail_ns + cpu as f64 * 500.0, seed * 1000 + i);
                crate::run::Interval::new(i as u32, i * 10_000_000_000, (i + 1) * 10_000_000_000, &t, i % 5, 0)
            })
            .collect();
        let key = crate::run::SeriesKey::new("wakeup", "latency", cpu);
        series.push(Series::new(key, "ns".into(), "adaptive".into(), ivs, vec![]).unwrap());
    }
    for cpu in 0..2i64 {
        let ivs = (0..(2 + 10 * cpu as u32))
            .map(|seq| {
                let mut t = Tally::new_signed();
                for v in -300..700i64 {
                    t.record_signed(v * 13 + i64::from(seq) * 7 + cpu * 5 + seed as i64);
                }
                crate::run::Interval::new(seq, u64::from(seq) * 100, u64::from(seq + 1) * 100, &t, 0, 0)
            })
            .collect();
        let key = crate::run::SeriesKey::new("sleep", "nanosleep@5ms", cpu);
        series.insert(cpu as usize, Series::new(key, "ns".into(), "adaptive".into(), ivs, vec![]).unwrap());
    }
    run.series = series;
    run
}

/// The comparison as `rtscope compare --json` writes it: equal text is
/// equal figures, bit for bit.
fn json_of(c: &Compared) -> String {
    serde_json::to_string(c).unwrap()
}

#[test]
fn runs_streamed_from_a_store_compare_as_runs_loaded_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = crate::store::Store::open(&dir.path().join("r.db")).unwrap();
    let runs = [long_run(3_000.0, 1), long_run(3_000.0, 2), long_run(4_500.0, 3)];
    let ids: Vec<i64> = runs.iter().map(|r| store.insert_run(r).unwrap()).collect();
    // The last run without its halves' sums: its summed read folds its intervals.
    store.store_sums(ids[0]).unwrap();
    store.store_sums(ids[1]).unwrap();
    let whole: Vec<Run> = ids.iter().map(|&id| store.load_run(id).unwrap()).collect();
    let summed: Vec<Run> = ids.iter().map(|&id| store.load_run_summed(id).unwrap()).collect();
    assert!(summed.iter().flat_map(|r| &r.series).flat_map(|s| &s.intervals).all(|iv| iv.hdr.is_empty()));
    let streamed: Vec<RunBlocks> = summed
        .iter()
        .zip(&ids)
        .map(|(r, &id)| RunBlocks::streamed(r, |f| store.for_each_interval_in_time(id, f)).unwrap())
        .collect();
    let expected = compare(&whole.iter().collect::<Vec<_>>());
    let got = compare_blocks(&summed.iter().collect::<Vec<_>>(), streamed);
    assert_eq!(json_of(&got), json_of(&expected));
    // The comparison resampled by intervals, and found the heavier tail.
    let merged = expected.series.iter().find(|s| s.probe == "wakeup" && s.cpu.is_none()).unwrap();
    assert_eq!(merged.resampled, vec![Some(Resampling::Intervals); 3]);
    assert!(merged.figures.iter().any(|f| f.changes[2] == Change::Worse), "{merged:?}");
    let signed = expected.series.iter().find(|s| s.probe == "sleep" && s.cpu == Some(0)).unwrap();
    assert_eq!(signed.resampled[0], Some(Resampling::Samples));
    // Runs that hold their histograms fold them the same way.
    let held: Vec<RunBlocks> = whole.iter().map(RunBlocks::of_run).collect();
    assert_eq!(json_of(&compare_blocks(&whole.iter().collect::<Vec<_>>(), held)), json_of(&expected));
}

#[test]
fn a_streamed_run_leaves_out_intervals_it_was_not_read_with_and_passes_on_errors() {
    let whole = long_run(3_000.0, 1);
    let mut summed = whole.clone();
    for s in &mut summed.series {
        s.intervals.iter_mut().for_each(|iv| iv.hdr.clear());
    }
    let each = |f: &mut dyn FnMut(usize, crate::run::Interval) -> anyhow::Result<()>| -> anyhow::Result<()> {
        for (i, s) in whole.series.iter().enumerate() {
            for iv in &s.intervals {
                f(i, iv.clone())?;
            }
            // One written since the run was read.
            let mut late = s.intervals[0].clone();
            late.seq = 10_000;
            f(i, late)?;
        }
        Ok(())
    };
    let streamed = RunBlocks::streamed(&summed, each).unwrap();
    let expected = compare(&[&whole, &whole]);
    let got = compare_blocks(&[&summed, &summed], vec![streamed, RunBlocks::of_run(&whole)]);
    assert_eq!(json_of(&got), json_of(&expected));
    let err = RunBlocks::streamed(&summed, |_| anyhow::bail!("the store went away")).err().unwrap();
    assert_eq!(err.to_string(), "the store went away");
    let err = RunBlocks::streamed(&summed, |f| f(99, whole.series[0].intervals[0].clone())).err().unwrap();
    assert!(err.to_string().contains("series 99"), "{err}");
}
