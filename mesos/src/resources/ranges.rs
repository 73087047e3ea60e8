//! Inclusive integer ranges kept normalised: sorted, disjoint, and with
//! adjacent ranges coalesced (`[1-2, 3-4]` is `[1-4]`), as Mesos keeps them.
//!
//! Every function takes and returns normalised lists, so equality of two
//! range sets is plain `Vec` equality.

/// An inclusive `(begin, end)` range with `begin <= end`.
pub(crate) type Interval = (u64, u64);

/// Sorts, then merges overlapping and adjacent intervals. Inputs must have
/// `begin <= end` (validated by the callers).
pub(crate) fn normalise(mut v: Vec<Interval>) -> Vec<Interval> {
    v.sort_unstable();
    let mut out: Vec<Interval> = Vec::with_capacity(v.len());
    for (begin, end) in v {
        if let Some(last) = out.last_mut()
            && begin <= last.1.saturating_add(1)
        {
            last.1 = last.1.max(end);
            continue;
        }
        out.push((begin, end));
    }
    out
}

/// `a ∪ b`.
pub(crate) fn union(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut all = Vec::with_capacity(a.len() + b.len());
    all.extend_from_slice(a);
    all.extend_from_slice(b);
    normalise(all)
}

/// `a \ b`: what is left of `a` after taking out every point of `b`.
pub(crate) fn subtract(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::with_capacity(a.len());
    let mut first = 0;
    for &(begin, end) in a {
        // `b` intervals wholly before this one can be skipped for good: `a`
        // is sorted, so they are before every later one too.
        while first < b.len() && b[first].1 < begin {
            first += 1;
        }
        let mut cursor = begin;
        let mut alive = true;
        for &(b_begin, b_end) in b[first..].iter().take_while(|r| r.0 <= end) {
            if b_begin > cursor {
                out.push((cursor, b_begin - 1));
            }
            if b_end >= end {
                alive = false;
                break;
            }
            // b_end < end <= u64::MAX, so this cannot overflow.
            cursor = cursor.max(b_end + 1);
        }
        if alive {
            out.push((cursor, end));
        }
    }
    out
}

/// Whether every point of `b` is in `a`.
pub(crate) fn contains(a: &[Interval], b: &[Interval]) -> bool {
    b.iter().all(|&(begin, end)| {
        // The last `a` interval starting at or before `begin` is the only
        // candidate: `a` is disjoint and sorted.
        let idx = a.partition_point(|r| r.0 <= begin);
        idx > 0 && a[idx - 1].1 >= end
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_merges_overlapping_and_adjacent() {
        assert_eq!(
            normalise(vec![(5, 6), (1, 2), (3, 3), (10, 12), (11, 20)]),
            vec![(1, 3), (5, 6), (10, 20)]
        );
        assert_eq!(normalise(vec![(0, u64::MAX), (7, 9)]), vec![(0, u64::MAX)]);
    }

    #[test]
    fn subtract_splits_and_trims() {
        assert_eq!(subtract(&[(1, 10)], &[(3, 4)]), vec![(1, 2), (5, 10)]);
        assert_eq!(subtract(&[(1, 10)], &[(0, 1), (10, 12)]), vec![(2, 9)]);
        assert_eq!(subtract(&[(1, 3), (5, 8)], &[(2, 6)]), vec![(1, 1), (7, 8)]);
        assert_eq!(subtract(&[(1, 3)], &[(1, 3)]), vec![]);
        assert_eq!(subtract(&[(0, u64::MAX)], &[(0, 0)]), vec![(1, u64::MAX)]);
    }

    #[test]
    fn contains_needs_every_point() {
        assert!(contains(&[(1, 10), (20, 30)], &[(2, 3), (20, 30)]));
        assert!(!contains(&[(1, 10), (20, 30)], &[(9, 21)]));
        assert!(!contains(&[], &[(1, 1)]));
        assert!(contains(&[], &[]));
    }
}
