//! How long finished tasks stay in the registry.
//!
//! Finished tasks are kept so that late status updates find their task
//! (and are absorbed instead of reported as unknown) and so that debug
//! output can show how a pod ended. They are bounded twice, as in the run
//! controller this follows: by count, so a burst cannot grow memory without
//! limit, and by age, so a quiet cluster does not hold them forever.

use std::time::{Duration, SystemTime};

use mesos::proto::TaskId;

/// The bounds on finished tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Keep at most this many finished tasks (the newest).
    pub max_finished: usize,
    /// Keep none that finished longer ago than this.
    pub max_age: Duration,
}

impl Retention {
    /// The earlier system's ring of 1024 finished tasks: enough for a debug
    /// page to show a recent burst of failures, small next to live tasks.
    pub const DEFAULT_MAX_FINISHED: usize = 1024;
    /// An hour: longer than several rounds of an agent's status-update
    /// retries (backing off to 10 minutes), so a redelivered terminal update
    /// still finds its task.
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(3600);
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_finished: Self::DEFAULT_MAX_FINISHED,
            max_age: Self::DEFAULT_MAX_AGE,
        }
    }
}

/// Which of the `finished` tasks (id, when it finished) to remove at `now`.
/// A finish time in the future (clock skew between callers) counts as now.
pub(crate) fn select(
    retention: &Retention,
    mut finished: Vec<(TaskId, SystemTime)>,
    now: SystemTime,
) -> Vec<TaskId> {
    // Newest first; ties broken by id so the choice does not depend on map order.
    finished.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    finished
        .into_iter()
        .enumerate()
        .filter(|(rank, (_, at))| {
            let age = now.duration_since(*at).unwrap_or(Duration::ZERO);
            *rank >= retention.max_finished || age > retention.max_age
        })
        .map(|(_, (id, _))| id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn ids(v: &[TaskId]) -> Vec<&str> {
        v.iter().map(|i| i.value.as_str()).collect()
    }

    #[test]
    fn keeps_the_newest_n_and_nothing_older_than_the_period() {
        let r = Retention {
            max_finished: 2,
            max_age: Duration::from_secs(100),
        };
        let finished = vec![
            (TaskId::new("a"), at(1000)),
            (TaskId::new("b"), at(1010)),
            (TaskId::new("c"), at(1020)),
            (TaskId::new("old"), at(800)),
        ];
        // c and b are the newest two; a is over the count; old is both.
        let mut removed = select(&r, finished.clone(), at(1030));
        removed.sort();
        assert_eq!(ids(&removed), ["a", "old"]);
        // Later, b ages out too (1115 - 1010 > 100), c stays (95 s old).
        let mut removed = select(&r, finished, at(1115));
        removed.sort();
        assert_eq!(ids(&removed), ["a", "b", "old"]);
    }

    #[test]
    fn zero_count_removes_every_finished_task_and_future_times_count_as_now() {
        let r = Retention {
            max_finished: 0,
            max_age: Duration::from_secs(100),
        };
        assert_eq!(
            select(&r, vec![(TaskId::new("x"), at(50))], at(10)).len(),
            1
        );
        let r = Retention::default();
        assert!(select(&r, vec![(TaskId::new("x"), at(50))], at(10)).is_empty());
    }
}
