//! Interval stabbing over a static set of address ranges.

/// Half-open ranges `[begin, end)` with a payload, sorted by `begin`, with
/// the running maximum of `end` so that a query stops scanning backwards
/// as soon as no earlier range can reach the address.
#[derive(Debug)]
pub(crate) struct Intervals<T> {
    items: Vec<(u64, u64, T)>,
    max_end: Vec<u64>,
}

impl<T> Default for Intervals<T> {
    fn default() -> Self {
        Intervals {
            items: Vec::new(),
            max_end: Vec::new(),
        }
    }
}

impl<T> Intervals<T> {
    pub(crate) fn new(mut items: Vec<(u64, u64, T)>) -> Intervals<T> {
        items.sort_by_key(|&(begin, end, _)| (begin, end));
        let mut max = 0;
        let max_end = items
            .iter()
            .map(|&(_, end, _)| {
                max = max.max(end);
                max
            })
            .collect();
        Intervals { items, max_end }
    }

    /// Payloads of the ranges containing `addr`, latest-starting first.
    pub(crate) fn containing(&self, addr: u64) -> impl Iterator<Item = &T> {
        let n = self.items.partition_point(|&(begin, _, _)| begin <= addr);
        (0..n)
            .rev()
            .take_while(move |&j| self.max_end[j] > addr)
            .filter(move |&j| self.items[j].1 > addr)
            .map(move |j| &self.items[j].2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stabbing() {
        let iv = Intervals::new(vec![
            (10, 20, 'a'),
            (0, 100, 'b'),
            (15, 16, 'c'),
            (30, 40, 'd'),
        ]);
        let at = |x| iv.containing(x).copied().collect::<String>();
        assert_eq!(at(15), "cab");
        assert_eq!(at(16), "ab");
        assert_eq!(at(20), "b");
        assert_eq!(at(35), "db");
        assert_eq!(at(100), "");
        assert_eq!(at(0), "b");
        assert_eq!(Intervals::<u8>::default().containing(3).count(), 0);
    }
}
