//! Kubernetes' `$(VAR)` expansion, bounded by what `execve` accepts.
//!
//! # Contract
//!
//! - [`expand_within`] is Kubernetes' `expansion.Expand`
//!   (`third_party/forked/golang/expansion`) exactly: one pass, `$(NAME)`
//!   of a defined variable is replaced by its value (never expanded again),
//!   `$$` is `$`, an undefined reference, an unterminated `$(`, a lone or
//!   trailing `$` stay as written.
//! - **Bounded.** The output may not pass the bound it is given: expansion
//!   stops at the first piece that would take it past, before that piece
//!   is copied, so a chain of variables that double each other costs at most
//!   the bound, never the size the chain would reach.
//! - The bounds are the kernel's own ([`ExecLimits`]): one string (an
//!   argument or `NAME=value`) may hold at most `MAX_ARG_STRLEN` bytes, and
//!   the whole environment and argument list at most what `execve` takes
//!   (`ARG_MAX`, from the stack rlimit). A container past either could never
//!   be started (`E2BIG`); it is a `CreateContainerConfigError` instead,
//!   naming what went past ([`ExecLimitError`]).

use std::collections::HashMap;

/// The kernel's limit on one argument or environment string, its NUL
/// included: `MAX_ARG_STRLEN`, 32 pages of 4 KiB.
pub const MAX_ARG_STRLEN: usize = 32 * 4096;

/// The least the kernel allows for all strings whatever the stack rlimit:
/// its `ARG_MAX`, 32 pages.
const KERNEL_ARG_MAX: u64 = 32 * 4096;

/// The kernel's default stack limit, `_STK_LIM` (8 MiB); at most 3/4 of it
/// goes to arguments and environment.
const STK_LIM: u64 = 8 << 20;

/// What one string costs besides its bytes: its NUL and its pointer in
/// `argv` or `envp`.
const PER_STRING: usize = 1 + size_of::<usize>();

/// The `execve` limits a container's environment and arguments must fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimits {
    /// All strings, their NULs and pointers together (`ARG_MAX`).
    pub total: usize,
    /// One string, its NUL included (`MAX_ARG_STRLEN`).
    pub string: usize,
}

impl ExecLimits {
    /// The limits `execve` applies to a process with this executor's stack
    /// rlimit, which a container inherits from its runtime: the kernel's
    /// rule in `fs/exec.c` (1/4 of the stack rlimit, at most 3/4 of
    /// `_STK_LIM`, at least 32 pages). This is `sysconf(_SC_ARG_MAX)` with
    /// the kernel's 6 MiB cap, which glibc's answer leaves out.
    pub fn of_this_process() -> ExecLimits {
        let stack = rustix::process::getrlimit(rustix::process::Resource::Stack).current;
        ExecLimits {
            total: Self::arg_max(stack),
            string: MAX_ARG_STRLEN,
        }
    }

    /// The kernel's `ARG_MAX` for a stack rlimit (`None`: unlimited).
    pub fn arg_max(stack_rlimit: Option<u64>) -> usize {
        let quarter = stack_rlimit.map_or(u64::MAX, |s| s / 4);
        let limit = (STK_LIM / 4 * 3).min(quarter).max(KERNEL_ARG_MAX);
        usize::try_from(limit).unwrap_or(usize::MAX)
    }
}

/// Why a container's environment or arguments cannot be given to `execve`.
/// The message is the container's `CreateContainerConfigError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecLimitError {
    /// One string would pass `MAX_ARG_STRLEN`.
    #[error(
        "{what} would be longer than {limit} bytes, the most the kernel takes in one string (MAX_ARG_STRLEN)"
    )]
    StringTooLong {
        /// What was being built: `env var "NAME"`, `args[2]`, ...
        what: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// Everything together would pass `ARG_MAX`.
    #[error(
        "{what} would take the container's environment and arguments past {limit} bytes, the most the kernel takes (ARG_MAX)"
    )]
    TooLarge {
        /// What was being built when the total went past.
        what: String,
        /// The limit, in bytes.
        limit: usize,
    },
}

/// An expansion that would have gone past its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow;

/// Which of the [`ExecLimits`] a string runs into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    String,
    Total,
}

impl Bound {
    fn error(self, what: String, limits: ExecLimits) -> ExecLimitError {
        match self {
            Bound::String => ExecLimitError::StringTooLong {
                what,
                limit: limits.string,
            },
            Bound::Total => ExecLimitError::TooLarge {
                what,
                limit: limits.total,
            },
        }
    }
}

/// Expands `input` by Kubernetes' rules, looking names up with `lookup`;
/// [`Overflow`] as soon as the output would pass `max` bytes.
pub fn expand_within<'v>(
    input: &str,
    lookup: impl Fn(&str) -> Option<&'v str>,
    max: usize,
) -> Result<String, Overflow> {
    let mut out = String::with_capacity(input.len().min(max));
    let mut push = |piece: &str| {
        if out.len() + piece.len() > max {
            return Err(Overflow);
        }
        out.push_str(piece);
        Ok(())
    };
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        let after = &rest[at + 1..];
        let Some(next) = after.chars().next() else {
            // A `$` that ends the input stays.
            break;
        };
        push(&rest[..at])?;
        rest = match next {
            '$' => {
                push("$")?;
                &after[1..]
            }
            '(' => match after[1..].find(')') {
                Some(end) => {
                    let name = &after[1..=end];
                    match lookup(name) {
                        Some(value) => push(value)?,
                        None => {
                            push("$(")?;
                            push(name)?;
                            push(")")?;
                        }
                    }
                    &after[end + 2..]
                }
                // Unterminated: `$(` stays, and the scan goes on after it.
                None => {
                    push("$(")?;
                    &after[1..]
                }
            },
            c => {
                push("$")?;
                push(&after[..c.len_utf8()])?;
                &after[c.len_utf8()..]
            }
        };
    }
    push(rest)?;
    Ok(out)
}

/// Expands `input` against `env` (later entries win); `None` once the
/// output would pass `max` bytes.
pub fn expand(input: &str, env: &[(String, String)], max: usize) -> Option<String> {
    let index = EnvIndex::new(env);
    expand_within(input, |n| index.get(n), max).ok()
}

/// Names to values over an environment list, the last entry of a name
/// winning, for lookups in constant time.
#[derive(Debug, Default)]
pub struct EnvIndex<'e> {
    by_name: HashMap<&'e str, &'e str>,
}

impl<'e> EnvIndex<'e> {
    /// Indexes `env`.
    pub fn new(env: &'e [(String, String)]) -> Self {
        EnvIndex {
            by_name: env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
        }
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&'e str> {
        self.by_name.get(name).copied()
    }
}

/// A container's environment as it is built, with what it costs `execve`
/// kept within [`ExecLimits`]: each variable is checked, and a `value` is
/// expanded within what is left, before it is added.
#[derive(Debug)]
pub struct EnvBuilder {
    vars: Vec<(String, String)>,
    index: HashMap<String, usize>,
    used: usize,
    limits: ExecLimits,
}

impl EnvBuilder {
    /// An empty environment under `limits`.
    pub fn new(limits: ExecLimits) -> Self {
        EnvBuilder {
            vars: Vec::new(),
            index: HashMap::new(),
            used: 0,
            limits,
        }
    }

    /// What `NAME=value` costs: its bytes, `=`, NUL and pointer.
    fn cost(name: &str, value_len: usize) -> usize {
        name.len() + 1 + value_len + PER_STRING
    }

    /// The longest value `name` may have, and which limit that is: within
    /// one string, and within what the rest of the environment leaves (its
    /// own old value freed). `Err` when not even an empty value fits.
    fn room(&self, name: &str) -> Result<(usize, Bound), ExecLimitError> {
        let string = self
            .limits
            .string
            .checked_sub(name.len() + 2)
            .ok_or_else(|| self.error(name, Bound::String))?;
        let old = self
            .index
            .get(name)
            .map_or(0, |&i| Self::cost(name, self.vars[i].1.len()));
        let total = self
            .limits
            .total
            .saturating_add(old)
            .checked_sub(self.used + Self::cost(name, 0))
            .ok_or_else(|| self.error(name, Bound::Total))?;
        Ok(if string <= total {
            (string, Bound::String)
        } else {
            (total, Bound::Total)
        })
    }

    fn error(&self, name: &str, bound: Bound) -> ExecLimitError {
        bound.error(format!("env var {name:?}"), self.limits)
    }

    /// Sets `name` to `value` (replacing an earlier value), if it fits.
    pub fn set(&mut self, name: String, value: String) -> Result<(), ExecLimitError> {
        let (room, bound) = self.room(&name)?;
        if value.len() > room {
            let string_room = self.limits.string - (name.len() + 2);
            let bound = if value.len() > string_room {
                Bound::String
            } else {
                bound
            };
            return Err(self.error(&name, bound));
        }
        self.put(name, value);
        Ok(())
    }

    /// Sets `name` to `value` expanded against the variables so far; the
    /// expansion stops, and nothing is set, once it would not fit.
    pub fn set_expanded(&mut self, name: &str, value: &str) -> Result<(), ExecLimitError> {
        let (room, bound) = self.room(name)?;
        let expanded = {
            let (vars, index) = (&self.vars, &self.index);
            expand_within(value, |n| index.get(n).map(|&i| vars[i].1.as_str()), room)
        };
        let value = expanded.map_err(|Overflow| self.error(name, bound))?;
        self.put(name.to_owned(), value);
        Ok(())
    }

    fn put(&mut self, name: String, value: String) {
        match self.index.get(&name) {
            Some(&i) => {
                self.used -= Self::cost(&name, self.vars[i].1.len());
                self.used += Self::cost(&name, value.len());
                self.vars[i].1 = value;
            }
            None => {
                self.used += Self::cost(&name, value.len());
                self.index.insert(name.clone(), self.vars.len());
                self.vars.push((name, value));
            }
        }
    }

    /// What the environment costs `execve` so far.
    pub fn used(&self) -> usize {
        self.used
    }

    /// The variables, each name once, in the order first set.
    pub fn into_vars(self) -> Vec<(String, String)> {
        self.vars
    }
}

/// What `env` costs `execve`.
pub fn env_cost(env: &[(String, String)]) -> usize {
    env.iter().map(|(k, v)| EnvBuilder::cost(k, v.len())).sum()
}

/// A list of expanded strings (`command` or `args`).
pub type Argv = Vec<String>;

/// `command` and `args` expanded against `env`, within what `env` leaves of
/// `limits`; an error names the first string that would not fit.
pub fn expand_argv(
    command: Option<&[String]>,
    args: Option<&[String]>,
    env: &[(String, String)],
    limits: ExecLimits,
) -> Result<(Option<Argv>, Option<Argv>), ExecLimitError> {
    let index = EnvIndex::new(env);
    let mut used = env_cost(env);
    let mut list = |field: &str, l: Option<&[String]>| {
        let Some(l) = l else { return Ok(None) };
        let mut out = Vec::with_capacity(l.len());
        for (i, a) in l.iter().enumerate() {
            let what = || format!("{field}[{i}]");
            let total = limits
                .total
                .checked_sub(used + PER_STRING)
                .ok_or_else(|| Bound::Total.error(what(), limits))?;
            let string = limits.string.saturating_sub(1);
            let (room, bound) = if string <= total {
                (string, Bound::String)
            } else {
                (total, Bound::Total)
            };
            let v = expand_within(a, |n| index.get(n), room)
                .map_err(|Overflow| bound.error(what(), limits))?;
            used += v.len() + PER_STRING;
            out.push(v);
        }
        Ok(Some(out))
    };
    let command = list("command", command)?;
    let args = list("args", args)?;
    Ok((command, args))
}

#[cfg(test)]
#[path = "expand_tests.rs"]
mod tests;
