//! `linux.seccomp` to BPF, for the embedded runtime (runc hands the same
//! section to libseccomp), with rust-vmm's `seccompiler`.
//!
//! # Contract
//!
//! - The result is a list of filters installed in order; the kernel runs
//!   them all and takes the most severe answer (ties: the last installed).
//!   A `seccompiler` filter has one action for a match and one otherwise,
//!   so a profile becomes: a guard (a syscall of another ABI is killed), a
//!   base filter (a syscall no rule matches gets the default action,
//!   every other is allowed), and one filter per other action (its rules'
//!   syscalls get it, every other is allowed). For a profile whose rules
//!   do not overlap, that is libseccomp's answer for every syscall.
//! - Rules follow runc: a rule's conditions must all hold, except that
//!   conditions repeating one argument are alternatives (each its own
//!   rule); arguments compare as 64-bit values; a name this architecture
//!   does not know is skipped, as runc skips names libseccomp does not know.
//! - Only the host's native ABI is compiled. A profile's other
//!   architectures (`SCMP_ARCH_X86` and `SCMP_ARCH_X32` beside
//!   `SCMP_ARCH_X86_64`) are not: their syscalls kill the process, which is
//!   stricter than runc, never looser.
//! - What cannot be compiled faithfully (flags, a listener, `SCMP_ACT_NOTIFY`,
//!   an unknown action or operator, an argument index past 5) is an error,
//!   never a dropped rule.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, sock_filter,
};

use crate::oci::spec::{Seccomp, SeccompArg};

/// Why a profile cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// Something libseccomp would take that this compiler cannot express.
    #[error("the embedded runtime cannot apply this seccomp profile: {0}")]
    Unsupported(String),
    /// An action, operator or index that means nothing.
    #[error("invalid seccomp profile: {0}")]
    Invalid(String),
    /// `seccompiler` refused the filter (too large, ...).
    #[error("seccomp filter: {0}")]
    Filter(String),
}

/// The native ABI's audit architecture, `seccompiler`'s target and syscall table.
#[cfg(target_arch = "x86_64")]
mod native {
    pub(super) const AUDIT_ARCH: u32 = 0xC000_003E;
    pub(super) const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::x86_64;
    pub(super) const NAME: &str = "SCMP_ARCH_X86_64";
    pub(super) use super::super::table_x86_64::SYSCALLS;
}
#[cfg(target_arch = "aarch64")]
mod native {
    pub(super) const AUDIT_ARCH: u32 = 0xC000_00B7;
    pub(super) const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::aarch64;
    pub(super) const NAME: &str = "SCMP_ARCH_AARCH64";
    pub(super) use super::super::table_aarch64::SYSCALLS;
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod native {
    pub(super) const AUDIT_ARCH: u32 = 0;
    pub(super) const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::x86_64;
    pub(super) const NAME: &str = "";
    pub(super) const SYSCALLS: &[(&str, i64)] = &[];
}

/// The syscall numbered by `name` on the native ABI.
pub fn syscall_number(name: &str) -> Option<i64> {
    native::SYSCALLS
        .binary_search_by(|(n, _)| n.cmp(&name))
        .ok()
        .and_then(|i| native::SYSCALLS.get(i))
        .map(|(_, nr)| *nr)
}

/// EPERM: libseccomp's errno when a profile names none.
const EPERM: u32 = 1;

/// x32 syscalls come in on x86_64's audit arch with this bit set.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// One rule chain per syscall: `None` matches whatever the arguments.
type Chains = BTreeMap<i64, Option<Vec<SeccompRule>>>;

/// The filters for `profile`, to install in order.
pub fn compile(profile: &Seccomp) -> Result<Vec<BpfProgram>, CompileError> {
    if native::NAME.is_empty() {
        return Err(CompileError::Unsupported(
            "seccomp filters are compiled for x86_64 and aarch64 only".into(),
        ));
    }
    if !profile.flags.is_empty() {
        return Err(CompileError::Unsupported(format!(
            "flags {:?}",
            profile.flags
        )));
    }
    if profile.listener_path.is_some() {
        return Err(CompileError::Unsupported("a listenerPath".into()));
    }
    for arch in &profile.architectures {
        if !arch.starts_with("SCMP_ARCH_") {
            return Err(CompileError::Invalid(format!(
                "unknown architecture {arch:?}"
            )));
        }
    }
    let default = action(&profile.default_action, profile.default_errno_ret)?;
    let mut all = Chains::new();
    let mut by_action: Vec<(SeccompAction, Chains)> = Vec::new();
    for rule in &profile.syscalls {
        let act = action(&rule.action, rule.errno_ret)?;
        let chain = conditions(&rule.args)?;
        let group = match by_action.iter().position(|(a, _)| *a == act) {
            Some(i) => i,
            None => {
                by_action.push((act, Chains::new()));
                by_action.len() - 1
            }
        };
        for name in &rule.names {
            let Some(nr) = syscall_number(name) else {
                continue;
            };
            merge(&mut all, nr, chain.clone());
            if let Some((_, chains)) = by_action.get_mut(group) {
                merge(chains, nr, chain.clone());
            }
        }
    }
    let mut programs = vec![guard()];
    if default != SeccompAction::Allow {
        programs.push(program(all, default, SeccompAction::Allow)?);
    }
    for (act, chains) in by_action {
        if act != SeccompAction::Allow && !chains.is_empty() {
            programs.push(program(chains, SeccompAction::Allow, act)?);
        }
    }
    Ok(programs)
}

/// Installs `profile` on this thread (and so on what it execs), with
/// `no_new_privs`, which `seccompiler` sets first (the kernel requires it
/// of a process without `CAP_SYS_ADMIN`).
pub fn install(profile: &Seccomp) -> Result<(), CompileError> {
    for p in compile(profile)? {
        seccompiler::apply_filter(&p).map_err(|e| CompileError::Filter(e.to_string()))?;
    }
    Ok(())
}

fn merge(chains: &mut Chains, nr: i64, chain: Option<Vec<SeccompRule>>) {
    let slot = chains.entry(nr).or_insert_with(|| Some(Vec::new()));
    match (slot.as_mut(), chain) {
        (Some(rules), Some(more)) => rules.extend(more),
        _ => *slot = None,
    }
}

/// `None` for no conditions, else the alternatives runc would add.
fn conditions(args: &[SeccompArg]) -> Result<Option<Vec<SeccompRule>>, CompileError> {
    if args.is_empty() {
        return Ok(None);
    }
    let conds = args.iter().map(condition).collect::<Result<Vec<_>, _>>()?;
    let repeated = args
        .iter()
        .enumerate()
        .any(|(i, a)| args[..i].iter().any(|b| b.index == a.index));
    let groups = if repeated {
        conds.into_iter().map(|c| vec![c]).collect()
    } else {
        vec![conds]
    };
    groups
        .into_iter()
        .map(|g| SeccompRule::new(g).map_err(|e| CompileError::Filter(e.to_string())))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn condition(a: &SeccompArg) -> Result<SeccompCondition, CompileError> {
    let (op, value) = match a.op.as_str() {
        "SCMP_CMP_NE" => (SeccompCmpOp::Ne, a.value),
        "SCMP_CMP_LT" => (SeccompCmpOp::Lt, a.value),
        "SCMP_CMP_LE" => (SeccompCmpOp::Le, a.value),
        "SCMP_CMP_EQ" => (SeccompCmpOp::Eq, a.value),
        "SCMP_CMP_GE" => (SeccompCmpOp::Ge, a.value),
        "SCMP_CMP_GT" => (SeccompCmpOp::Gt, a.value),
        // `(arg & value) == valueTwo`, as libseccomp reads it.
        "SCMP_CMP_MASKED_EQ" => (SeccompCmpOp::MaskedEq(a.value), a.value_two),
        other => {
            return Err(CompileError::Invalid(format!("unknown operator {other:?}")));
        }
    };
    let index = u8::try_from(a.index)
        .ok()
        .filter(|i| *i <= 5)
        .ok_or_else(|| CompileError::Invalid(format!("argument index {} past 5", a.index)))?;
    SeccompCondition::new(index, SeccompCmpArgLen::Qword, op, value)
        .map_err(|e| CompileError::Filter(e.to_string()))
}

/// An `SCMP_ACT_*` with its errno (runc's defaults: EPERM).
fn action(name: &str, errno: Option<u32>) -> Result<SeccompAction, CompileError> {
    Ok(match name {
        "SCMP_ACT_ALLOW" => SeccompAction::Allow,
        "SCMP_ACT_ERRNO" => SeccompAction::Errno(errno.unwrap_or(EPERM)),
        "SCMP_ACT_KILL" | "SCMP_ACT_KILL_THREAD" => SeccompAction::KillThread,
        "SCMP_ACT_KILL_PROCESS" => SeccompAction::KillProcess,
        "SCMP_ACT_TRAP" => SeccompAction::Trap,
        "SCMP_ACT_TRACE" => SeccompAction::Trace(errno.unwrap_or(EPERM)),
        "SCMP_ACT_LOG" => SeccompAction::Log,
        "SCMP_ACT_NOTIFY" => {
            return Err(CompileError::Unsupported("SCMP_ACT_NOTIFY".into()));
        }
        other => return Err(CompileError::Invalid(format!("unknown action {other:?}"))),
    })
}

fn program(
    chains: Chains,
    mismatch: SeccompAction,
    matched: SeccompAction,
) -> Result<BpfProgram, CompileError> {
    let rules = chains
        .into_iter()
        .map(|(nr, c)| (nr, c.unwrap_or_default()))
        .collect();
    let filter = SeccompFilter::new(rules, mismatch, matched, native::TARGET)
        .map_err(|e| CompileError::Filter(e.to_string()))?;
    BpfProgram::try_from(filter).map_err(|e| CompileError::Filter(e.to_string()))
}

/// Kills a syscall of any ABI but the native one (x32's included, which
/// shares x86_64's audit arch); allows the rest to the other filters.
fn guard() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JSET_K: u16 = 0x45;
    const RET_K: u16 = 0x06;
    // `struct seccomp_data`: nr at 0, arch at 4.
    let (nr, arch) = (0, 4);
    let op = |code, k, jt, jf| sock_filter { code, jt, jf, k };
    let kill = op(RET_K, libc::SECCOMP_RET_KILL_PROCESS, 0, 0);
    let mut p = vec![
        op(LD_W_ABS, arch, 0, 0),
        op(JEQ_K, native::AUDIT_ARCH, 1, 0),
        kill.clone(),
    ];
    if cfg!(target_arch = "x86_64") {
        p.extend([
            op(LD_W_ABS, nr, 0, 0),
            op(JSET_K, X32_SYSCALL_BIT, 0, 1),
            kill,
        ]);
    }
    p.push(op(RET_K, libc::SECCOMP_RET_ALLOW, 0, 0));
    p
}
