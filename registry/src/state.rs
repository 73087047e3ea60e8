//! A task's lifecycle state and its flags, as words on the wire and in logs.
//!
//! The earlier system printed states as integers in its debug output; here
//! both serde and `Display` use the same lower-case words, so a log line, a
//! debug page and a JSON dump all read alike.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a pod task is in its life, as the framework sees it.
///
/// Every Mesos `TaskState` lands on exactly one of these (see
/// [`crate::machine`] for the mapping and the transition diagram). `Ord`
/// is declaration order, for sorting and map keys; it is not the order of
/// progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Registered; placed or not, launched or not, but not running yet
    /// (Mesos STAGING and STARTING land here).
    Pending,
    /// Mesos says the task runs.
    Running,
    /// Mesos says the task is being killed (TASK_KILLING); still alive.
    Killing,
    /// The agent is partitioned away (TASK_UNREACHABLE, or TASK_LOST for a
    /// task that had launched). The task may still run and may come back to
    /// RUNNING when the partition heals, so it stays live.
    Unreachable,
    /// The master knows nothing of the task (TASK_UNKNOWN). It may still run
    /// on an agent that has not re-registered, so it stays live until the
    /// framework decides otherwise.
    Unknown,
    /// Terminal: the task ended, for good or ill, or never started. Absorbing.
    Finished,
}

impl State {
    /// Every state, in declaration order (handy for tables and tests).
    pub const ALL: [State; 6] = [
        State::Pending,
        State::Running,
        State::Killing,
        State::Unreachable,
        State::Unknown,
        State::Finished,
    ];

    /// Whether the state is absorbing: no status update moves a task out of it.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Finished)
    }

    /// Whether a task in this state may still run somewhere, and therefore
    /// blocks a second task for the same pod.
    pub fn is_live(self) -> bool {
        !self.is_terminal()
    }

    /// The state as its word (`"pending"`, `"running"`…).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Running => "running",
            State::Killing => "killing",
            State::Unreachable => "unreachable",
            State::Unknown => "unknown",
            State::Finished => "finished",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One fact about a task that, once true, stays true.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flag {
    /// The framework sent ACCEPT with a LAUNCH for this task (or Mesos has
    /// reported it, which proves the same).
    Launched,
    /// The pod is bound to the task's node in the store.
    Bound,
    /// The pod was deleted by a user; the task is to be killed.
    Deleted,
}

impl Flag {
    /// Every flag, in bit order.
    pub const ALL: [Flag; 3] = [Flag::Launched, Flag::Bound, Flag::Deleted];

    /// The flag as its word (`"launched"`, `"bound"`, `"deleted"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Flag::Launched => "launched",
            Flag::Bound => "bound",
            Flag::Deleted => "deleted",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Flag::Launched => 1,
            Flag::Bound => 2,
            Flag::Deleted => 4,
        }
    }
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of [`Flag`]s in one byte; serialises as a list of words
/// (`["launched","bound"]`) and displays as `launched,bound`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags(u8);

impl Flags {
    /// No flags.
    pub const fn empty() -> Self {
        Flags(0)
    }

    /// Whether `f` is set.
    pub fn contains(self, f: Flag) -> bool {
        self.0 & f.bit() != 0
    }

    /// Sets `f`.
    pub fn insert(&mut self, f: Flag) {
        self.0 |= f.bit();
    }

    /// Clears `f`.
    pub fn remove(&mut self, f: Flag) {
        self.0 &= !f.bit();
    }

    /// Every flag set in either.
    pub fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// Whether no flag is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The flags that are set, in bit order.
    pub fn iter(self) -> impl Iterator<Item = Flag> {
        Flag::ALL.into_iter().filter(move |f| self.contains(*f))
    }
}

impl FromIterator<Flag> for Flags {
    fn from_iter<I: IntoIterator<Item = Flag>>(iter: I) -> Self {
        let mut flags = Flags::empty();
        for f in iter {
            flags.insert(f);
        }
        flags
    }
}

impl fmt::Display for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, flag) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(flag.as_str())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl Serialize for Flags {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Flags {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Vec::<Flag>::deserialize(d)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn states_serialise_and_display_as_words() {
        for s in State::ALL {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{s}\""));
            assert!(s.to_string().chars().all(|c| c.is_ascii_lowercase()));
            assert_eq!(serde_json::from_str::<State>(&json).unwrap(), s);
        }
        assert_eq!(State::Running.to_string(), "running");
    }

    #[test]
    fn flags_serialise_as_a_list_of_words_and_round_trip() {
        let flags: Flags = [Flag::Bound, Flag::Launched].into_iter().collect();
        assert_eq!(
            serde_json::to_string(&flags).unwrap(),
            r#"["launched","bound"]"#
        );
        assert_eq!(flags.to_string(), "launched,bound");
        let back: Flags = serde_json::from_str(r#"["bound","launched"]"#).unwrap();
        assert_eq!(back, flags);
        assert!(serde_json::from_str::<Flags>(r#"["sideways"]"#).is_err());
    }

    #[test]
    fn flags_insert_remove_contains() {
        let mut flags = Flags::empty();
        assert!(flags.is_empty());
        flags.insert(Flag::Deleted);
        assert!(flags.contains(Flag::Deleted));
        assert!(!flags.contains(Flag::Bound));
        flags.remove(Flag::Deleted);
        assert!(flags.is_empty());
    }

    #[test]
    fn only_finished_is_terminal() {
        for s in State::ALL {
            assert_eq!(s.is_terminal(), s == State::Finished, "{s}");
            assert_eq!(s.is_live(), !s.is_terminal());
        }
    }
}
