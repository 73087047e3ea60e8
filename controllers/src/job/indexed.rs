//! Indexed Jobs (KCM's `indexed_job_utils.go`): sets of completion indexes
//! in the `"1,3-5,7"` form of `status.completedIndexes`,
//! `status.failedIndexes` and a success policy's `succeededIndexes`; which
//! indexes to start next; which pods repeat an index.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::pods::{completion_index, finished_at, index_absolute_failure_count};
use crate::replicaset::rank::pods_to_delete;

/// A set of indexes as ordered, disjoint, non-adjacent closed intervals
/// (KCM's `orderedIntervals`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Intervals(Vec<(i64, i64)>);

impl Intervals {
    /// Parses `"1,3-5,7"` as KCM's `parseIndexesFromString` does: an
    /// unparsable interval is skipped, parsing stops at the first interval
    /// starting at or past `completions`, and an interval's end is cut to
    /// `completions − 1`. (An interval whose end is below its start, which
    /// KCM would count negatively, is skipped.)
    pub(crate) fn parse(s: &str, completions: i32) -> Self {
        let completions = i64::from(completions);
        let mut out: Vec<(i64, i64)> = Vec::new();
        if s.is_empty() {
            return Intervals(out);
        }
        for part in s.split(',') {
            let mut limits = part.split('-');
            let Some(Ok(first)) = limits.next().map(str::parse::<i64>) else {
                continue;
            };
            if first >= completions {
                break;
            }
            let last = match limits.next() {
                None => first,
                Some(l) => match l.parse::<i64>() {
                    Ok(l) => l.min(completions - 1),
                    Err(_) => continue,
                },
            };
            if last < first {
                continue;
            }
            match out.last_mut() {
                Some(prev) if prev.1 == first - 1 => prev.1 = last,
                _ => out.push((first, last)),
            }
        }
        Intervals(out)
    }

    /// The union with `indexes`, which must come in increasing order.
    pub(crate) fn with_indexes<I: IntoIterator<Item = i64>>(&self, indexes: I) -> Self {
        let other = Intervals(indexes.into_iter().map(|i| (i, i)).collect());
        self.merge(&other)
    }

    /// The union of two sets (KCM's `merge`: a merge by start, joining
    /// what overlaps or touches).
    pub(crate) fn merge(&self, other: &Intervals) -> Self {
        let mut out: Vec<(i64, i64)> = Vec::with_capacity(self.0.len() + other.0.len());
        let (mut i, mut j) = (0, 0);
        while i < self.0.len() || j < other.0.len() {
            let next = match (self.0.get(i), other.0.get(j)) {
                (Some(a), Some(b)) if a.0 < b.0 => {
                    i += 1;
                    *a
                }
                (_, Some(b)) => {
                    j += 1;
                    *b
                }
                (Some(a), None) => {
                    i += 1;
                    *a
                }
                (None, None) => break,
            };
            match out.last_mut() {
                Some(last) if next.0 <= last.1.saturating_add(1) => last.1 = last.1.max(next.1),
                _ => out.push(next),
            }
        }
        Intervals(out)
    }

    /// Whether `ix` is in the set.
    pub(crate) fn has(&self, ix: i64) -> bool {
        let pos = self.0.partition_point(|iv| iv.1 < ix);
        self.0.get(pos).is_some_and(|iv| iv.0 <= ix)
    }

    /// How many indexes the set holds.
    pub(crate) fn total(&self) -> i64 {
        self.0
            .iter()
            .fold(0i64, |n, iv| n.saturating_add(iv.1 - iv.0 + 1))
    }

    /// [`Intervals::total`] as a status counter.
    pub(crate) fn total_i32(&self) -> i32 {
        i32::try_from(self.total()).unwrap_or(i32::MAX)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn intervals(&self) -> &[(i64, i64)] {
        &self.0
    }
}

/// `"1,3-5,7"`; two consecutive indexes are written `"3,4"`.
impl fmt::Display for Intervals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, (first, last)) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            write!(f, "{first}")?;
            if last > first {
                let sep = if *last == first + 1 { "," } else { "-" };
                write!(f, "{sep}{last}")?;
            }
        }
        Ok(())
    }
}

/// The indexes of `pods` (those that carry one).
pub(crate) fn indexes_of<'a>(pods: impl IntoIterator<Item = &'a &'a Pod>) -> BTreeSet<i64> {
    pods.into_iter()
        .filter_map(|p| completion_index(p))
        .collect()
}

/// KCM's `firstPendingIndexes`: up to `count` indexes below `completions`,
/// lowest first, that are not in `non_pending` (succeeded, active, failed,
/// and terminating when replacements wait for Failed).
pub(crate) fn first_pending_indexes(
    non_pending: &Intervals,
    count: usize,
    completions: i32,
) -> Vec<i64> {
    let completions = i64::from(completions);
    let mut out = Vec::with_capacity(count.min(1024));
    let mut candidate = 0i64;
    for &(first, last) in non_pending.intervals() {
        while candidate < completions && out.len() < count && candidate < first {
            out.push(candidate);
            candidate += 1;
        }
        if candidate <= last {
            candidate = last.saturating_add(1);
        }
    }
    while candidate < completions && out.len() < count {
        out.push(candidate);
        candidate += 1;
    }
    out
}

/// KCM's `activePodsForRemoval` for an Indexed Job: every active pod with
/// no index or an index at or past `completions`; for an index held by
/// several pods, all but the one furthest along; then, if that is fewer
/// than `rm_at_least`, more pods in deletion order.
pub(crate) fn active_pods_for_removal<'a>(
    active: &[&'a Pod],
    completions: i32,
    rm_at_least: usize,
    now: Timestamp,
) -> Vec<&'a Pod> {
    let mut rm: Vec<&'a Pod> = Vec::new();
    let mut by_index: BTreeMap<i64, Vec<&'a Pod>> = BTreeMap::new();
    for p in active {
        match completion_index(p).filter(|i| *i < i64::from(completions)) {
            Some(i) => by_index.entry(i).or_default().push(p),
            None => rm.push(p),
        }
    }
    let mut left: Vec<&'a Pod> = Vec::new();
    for (_, group) in by_index {
        let surplus = group.len().saturating_sub(1);
        let gone = pods_to_delete(&group, &[], surplus, now);
        left.extend(
            group
                .into_iter()
                .filter(|p| !gone.iter().any(|g| std::ptr::eq(*g, *p))),
        );
        rm.extend(gone);
    }
    if rm.len() < rm_at_least {
        rm.extend(pods_to_delete(&left, &[], rm_at_least - rm.len(), now));
    }
    rm
}

/// KCM's `getPodsWithDelayedDeletionPerIndex`, for backoffLimitPerIndex:
/// per index not yet succeeded, failed or active, the last failed pod
/// (most failures, then latest finish). Its finalizer stays until its
/// replacement exists, so the replacement can read its failure count.
/// `failed_candidates` are the failed pods not yet counted.
pub(crate) fn delayed_deletion_per_index<'a>(
    failed_candidates: impl IntoIterator<Item = (i64, &'a Pod)>,
    settled: impl Fn(i64) -> bool,
) -> BTreeMap<i64, &'a Pod> {
    let mut out: BTreeMap<i64, &'a Pod> = BTreeMap::new();
    for (ix, p) in failed_candidates {
        if settled(ix) {
            continue;
        }
        match out.get(&ix) {
            Some(last)
                if !(index_absolute_failure_count(last) <= index_absolute_failure_count(p)
                    && finished_at(p) >= finished_at(last)) => {}
            _ => {
                out.insert(ix, p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str, completions: i32) -> String {
        Intervals::parse(s, completions).to_string()
    }

    #[test]
    fn formats_like_completed_indexes() {
        let iv = Intervals::default().with_indexes([1, 3, 4, 5, 7]);
        assert_eq!(iv.to_string(), "1,3-5,7");
        assert_eq!(Intervals::default().with_indexes([3, 4]).to_string(), "3,4");
        assert_eq!(Intervals::default().to_string(), "");
        assert_eq!(iv.total(), 5);
        assert!(iv.has(4) && iv.has(7) && !iv.has(2) && !iv.has(8) && !iv.has(0));
    }

    #[test]
    fn parses_and_cuts_at_completions_skipping_garbage() {
        assert_eq!(parsed("1,3-5,7", 10), "1,3-5,7");
        assert_eq!(parsed("1,3-5,7", 5), "1,3,4");
        assert_eq!(parsed("0-2,3,x,5-y,9-8,6", 100), "0-3,6");
        assert_eq!(parsed("", 3), "");
        assert_eq!(parsed("-1,2", 5), "2");
        assert_eq!(
            parsed("0-99999999999999999999", 3),
            "",
            "an unparsable end skips the interval"
        );
        assert_eq!(
            Intervals::parse("0-2147483646", i32::MAX).total(),
            2_147_483_647
        );
    }

    #[test]
    fn merge_joins_touching_and_overlapping_intervals() {
        let a = Intervals::parse("0-2,8", 20);
        let b = Intervals::parse("3,5-9,12", 20);
        assert_eq!(a.merge(&b).to_string(), "0-3,5-9,12");
        assert_eq!(b.merge(&a), a.merge(&b));
    }

    #[test]
    fn first_pending_skips_what_is_not_pending() {
        let non_pending = Intervals::parse("0,2-4,6", 10);
        assert_eq!(first_pending_indexes(&non_pending, 3, 10), [1, 5, 7]);
        assert_eq!(first_pending_indexes(&non_pending, 10, 8), [1, 5, 7]);
        assert_eq!(
            first_pending_indexes(&non_pending, 0, 10),
            Vec::<i64>::new()
        );
        assert_eq!(first_pending_indexes(&Intervals::default(), 2, 5), [0, 1]);
    }
}
