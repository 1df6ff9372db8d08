//! Independent work on every core: `map` computes `f` of each item on
//! threads of its own and returns the results in the items' order, as a
//! sequential map would. For work whose items share nothing (each series'
//! analysis, each series' histograms), so the results are those of doing
//! the items one after another.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of every item, in order, on up to as many threads as this process
/// may use (one: no thread is started). A panic in `f` is raised again
/// here.
pub(crate) fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else { break };
            done.push((i, f(item)));
        }
        done
    };
    let mut out: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
        for w in workers {
            match w.join() {
                Ok(done) => done.into_iter().for_each(|(i, r)| out[i] = Some(r)),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    out.into_iter().map(|r| r.expect("every item is done")).collect()
}

/// [`map`] of items taken by value.
pub(crate) fn map_into<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let slots: Vec<std::sync::Mutex<Option<T>>> = items.into_iter().map(|t| std::sync::Mutex::new(Some(t))).collect();
    map(&slots, |slot| f(slot.lock().unwrap_or_else(|e| e.into_inner()).take().expect("each item is taken once")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn maps_in_order() {
        let items: Vec<u64> = (0..1000).collect();
        assert_eq!(super::map(&items, |&i| i * i), items.iter().map(|&i| i * i).collect::<Vec<_>>());
        assert!(super::map(&[] as &[u8], |_| 0).is_empty());
        let owned: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        assert_eq!(
            super::map_into(owned.clone(), |s| s + "!"),
            owned.iter().map(|s| format!("{s}!")).collect::<Vec<_>>()
        );
    }
}
