#![allow(clippy::unwrap_used)]

use super::compile::{CompileError, compile, syscall_number};
use super::*;
use crate::oci::spec::{SeccompArg, Syscall};
use crate::pod::SeccompProfile;

const ALLOW: u32 = 0x7fff_0000;
const KILL_PROCESS: u32 = 0x8000_0000;
const fn errno(e: u32) -> u32 {
    0x0005_0000 | e
}

/// A classic-BPF interpreter for what seccompiler and the guard emit,
/// over a `struct seccomp_data` (x86_64 and aarch64 are little-endian).
fn run(prog: &[seccompiler::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let mut data = Vec::with_capacity(64);
    data.extend(nr.to_le_bytes());
    data.extend(arch.to_le_bytes());
    data.extend(0u64.to_le_bytes());
    for a in args {
        data.extend(a.to_le_bytes());
    }
    let (mut acc, mut pc) = (0u32, 0usize);
    loop {
        let i = &prog[pc];
        pc += 1;
        match i.code {
            0x20 => {
                let at = i.k as usize;
                acc = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
            }
            0x54 => acc &= i.k,
            0x05 => pc += i.k as usize,
            0x06 => return i.k,
            code => {
                let hit = match code {
                    0x15 => acc == i.k,
                    0x25 => acc > i.k,
                    0x35 => acc >= i.k,
                    0x45 => acc & i.k != 0,
                    other => panic!("opcode {other:#x}"),
                };
                pc += usize::from(if hit { i.jt } else { i.jf });
            }
        }
    }
}

/// What the kernel answers with every filter installed: the most severe
/// action, the newest filter's among equals.
fn verdict(profile: &Seccomp, arch: u32, name: &str, args: [u64; 6]) -> u32 {
    let nr = u32::try_from(syscall_number(name).unwrap()).unwrap();
    verdict_nr(profile, arch, nr, args)
}

fn verdict_nr(profile: &Seccomp, arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let programs = compile(profile).unwrap();
    let mut best = ALLOW;
    for p in programs.iter().rev() {
        let ret = run(p, arch, nr, args);
        if ((ret & 0xffff_0000) as i32) < ((best & 0xffff_0000) as i32) {
            best = ret;
        }
    }
    best
}

#[cfg(target_arch = "x86_64")]
const NATIVE: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const NATIVE: u32 = 0xC000_00B7;

fn caps(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn a0(v: u64) -> [u64; 6] {
    [v, 0, 0, 0, 0, 0]
}

#[test]
fn the_runtime_default_allows_the_list_and_refuses_the_rest_with_eperm() {
    let p = default_profile::profile(&caps(crate::oci::spec::DEFAULT_CAPABILITIES));
    let v = |name, args| verdict(&p, NATIVE, name, args);
    for ok in [
        "read",
        "write",
        "openat",
        "execve",
        "exit_group",
        "ptrace",
        "prctl",
    ] {
        assert_eq!(v(ok, a0(0)), ALLOW, "{ok}");
    }
    // CAP_SYS_ADMIN's syscalls, and those of capabilities not in the set.
    for refused in [
        "unshare", "mount", "setns", "bpf", "reboot", "keyctl", "add_key",
    ] {
        assert_eq!(v(refused, a0(0)), errno(1), "{refused}");
    }
    // CAP_SYS_CHROOT is in the default set.
    assert_eq!(v("chroot", a0(0)), ALLOW);
    // clone: a thread or a fork, but no new namespace; clone3: ENOSYS.
    assert_eq!(v("clone", a0(0x0001_1200)), ALLOW);
    assert_eq!(v("clone", a0(0x1000_0000 | 17)), errno(1));
    assert_eq!(v("clone3", a0(0)), errno(38));
    // socket: every family but AF_ALG (38) and AF_VSOCK (40).
    for (family, want) in [
        (2, ALLOW),
        (37, ALLOW),
        (38, errno(1)),
        (39, ALLOW),
        (40, errno(1)),
        (41, ALLOW),
    ] {
        assert_eq!(v("socket", a0(family)), want, "socket({family})");
    }
    // personality: only the listed values, compared on all 64 bits.
    assert_eq!(v("personality", a0(0x0008)), ALLOW);
    assert_eq!(v("personality", a0(0xffff_ffff)), ALLOW);
    assert_eq!(v("personality", a0(0x0040_0000)), errno(1));
    assert_eq!(v("personality", a0(1 << 32)), errno(1));
}

#[test]
fn capabilities_in_the_bounding_set_widen_the_default() {
    let p = default_profile::profile(&caps(&["CAP_SYS_ADMIN", "CAP_SYS_TIME"]));
    for name in ["unshare", "mount", "clone3", "settimeofday"] {
        assert_eq!(verdict(&p, NATIVE, name, a0(0)), ALLOW, "{name}");
    }
    assert_eq!(verdict(&p, NATIVE, "clone", a0(0x1000_0000)), ALLOW);
    let none = default_profile::profile(&[]);
    assert_eq!(verdict(&none, NATIVE, "chroot", a0(0)), errno(1));
}

#[test]
fn other_abis_are_killed_rather_than_let_through() {
    let deny_list = Seccomp {
        default_action: "SCMP_ACT_ALLOW".into(),
        syscalls: vec![Syscall {
            names: vec!["mkdir".into(), "mkdirat".into()],
            action: "SCMP_ACT_ERRNO".into(),
            errno_ret: Some(13),
            args: Vec::new(),
        }],
        ..Seccomp::default()
    };
    assert_eq!(verdict(&deny_list, NATIVE, "mkdirat", a0(0)), errno(13));
    assert_eq!(verdict(&deny_list, NATIVE, "read", a0(0)), ALLOW);
    // i386's audit arch.
    assert_eq!(
        verdict(&deny_list, 0x4000_0003, "read", a0(0)),
        KILL_PROCESS
    );
    if cfg!(target_arch = "x86_64") {
        let x32_mkdirat = 0x4000_0000 | u32::try_from(syscall_number("mkdirat").unwrap()).unwrap();
        assert_eq!(
            verdict_nr(&deny_list, NATIVE, x32_mkdirat, a0(0)),
            KILL_PROCESS
        );
    }
}

#[test]
fn conditions_follow_runc() {
    let arg = |index, value, op: &str| SeccompArg {
        index,
        value,
        value_two: 0,
        op: op.into(),
    };
    let rule = |args| Seccomp {
        default_action: "SCMP_ACT_ERRNO".into(),
        default_errno_ret: Some(22),
        syscalls: vec![Syscall {
            names: vec!["lseek".into(), "no_such_syscall".into()],
            action: "SCMP_ACT_ALLOW".into(),
            errno_ret: None,
            args,
        }],
        ..Seccomp::default()
    };
    // Conditions on different arguments must all hold.
    let both = rule(vec![arg(1, 5, "SCMP_CMP_GE"), arg(2, 0, "SCMP_CMP_EQ")]);
    assert_eq!(verdict(&both, NATIVE, "lseek", [0, 5, 0, 0, 0, 0]), ALLOW);
    assert_eq!(
        verdict(&both, NATIVE, "lseek", [0, 5, 1, 0, 0, 0]),
        errno(22)
    );
    assert_eq!(
        verdict(&both, NATIVE, "lseek", [0, 4, 0, 0, 0, 0]),
        errno(22)
    );
    // Repeated on one argument, they are alternatives.
    let either = rule(vec![arg(2, 0, "SCMP_CMP_EQ"), arg(2, 2, "SCMP_CMP_EQ")]);
    for (whence, want) in [(0, ALLOW), (1, errno(22)), (2, ALLOW)] {
        assert_eq!(
            verdict(&either, NATIVE, "lseek", [0, 0, whence, 0, 0, 0]),
            want
        );
    }
    // MASKED_EQ: (arg & value) == valueTwo.
    let masked = rule(vec![SeccompArg {
        index: 0,
        value: 0xf0,
        value_two: 0x30,
        op: "SCMP_CMP_MASKED_EQ".into(),
    }]);
    assert_eq!(verdict(&masked, NATIVE, "lseek", a0(0x3f)), ALLOW);
    assert_eq!(verdict(&masked, NATIVE, "lseek", a0(0x4f)), errno(22));
}

#[test]
fn what_cannot_be_compiled_is_refused_not_dropped() {
    let base = Seccomp {
        default_action: "SCMP_ACT_ERRNO".into(),
        ..Seccomp::default()
    };
    let with_rule = |action: &str, op: &str, index: u32| Seccomp {
        syscalls: vec![Syscall {
            names: vec!["read".into()],
            action: action.into(),
            errno_ret: None,
            args: vec![SeccompArg {
                index,
                value: 1,
                value_two: 0,
                op: op.into(),
            }],
        }],
        ..base.clone()
    };
    let unsupported = |p: &Seccomp| matches!(compile(p), Err(CompileError::Unsupported(_)));
    let invalid = |p: &Seccomp| matches!(compile(p), Err(CompileError::Invalid(_)));
    assert!(unsupported(&with_rule("SCMP_ACT_NOTIFY", "SCMP_CMP_EQ", 0)));
    assert!(invalid(&with_rule("SCMP_ACT_MAYBE", "SCMP_CMP_EQ", 0)));
    assert!(invalid(&with_rule("SCMP_ACT_ALLOW", "SCMP_CMP_ABOUT", 0)));
    assert!(invalid(&with_rule("SCMP_ACT_ALLOW", "SCMP_CMP_EQ", 6)));
    let flags = Seccomp {
        flags: vec!["SECCOMP_FILTER_FLAG_LOG".into()],
        ..base.clone()
    };
    assert!(unsupported(&flags));
    let bad_default = Seccomp {
        default_action: "SCMP_ACT_SOMETIMES".into(),
        ..base
    };
    let e = compile(&bad_default).unwrap_err().to_string();
    assert_eq!(
        e,
        "invalid seccomp profile: unknown action \"SCMP_ACT_SOMETIMES\""
    );
}

#[test]
fn the_default_profile_is_written_in_the_runtime_specs_words() {
    let p = default_profile::profile(&caps(crate::oci::spec::DEFAULT_CAPABILITIES));
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["defaultAction"], "SCMP_ACT_ERRNO");
    assert!(json.get("defaultErrnoRet").is_none(), "{json}");
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            json["architectures"],
            serde_json::json!(["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"])
        );
    }
    let clone3 = json["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["names"] == serde_json::json!(["clone3"]))
        .unwrap();
    assert_eq!(clone3["action"], "SCMP_ACT_ERRNO");
    assert_eq!(clone3["errnoRet"], 38);
    let clone = json["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["names"] == serde_json::json!(["clone"]))
        .unwrap();
    assert_eq!(
        clone["args"],
        serde_json::json!([{"index": 0, "value": 0x7E02_0000u64, "op": "SCMP_CMP_MASKED_EQ"}])
    );
    let back: Seccomp = serde_json::from_value(json).unwrap();
    assert_eq!(back, p);
}

#[test]
fn the_syscall_tables_are_sorted_and_right() {
    for table in [table_x86_64::SYSCALLS, table_aarch64::SYSCALLS] {
        assert!(table.windows(2).all(|w| w[0].0 < w[1].0));
    }
    if cfg!(target_arch = "x86_64") {
        assert_eq!(syscall_number("read"), Some(libc::SYS_read));
        assert_eq!(syscall_number("unshare"), Some(libc::SYS_unshare));
        assert_eq!(syscall_number("clone3"), Some(libc::SYS_clone3));
        assert_eq!(syscall_number("chown32"), None);
    }
}

fn security(container: Option<(&str, Option<&str>)>, privileged: bool) -> Security {
    Security {
        privileged,
        seccomp: container.map(|(kind, localhost)| SeccompProfile {
            kind: kind.into(),
            localhost_profile: localhost.map(str::to_owned),
        }),
        ..Security::default()
    }
}

#[test]
fn kubelet_chooses_the_profile_and_localhost_files_are_read_as_containerd_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let settings = SeccompSettings {
        runtime_default: false,
        root_dir: dir.path().to_path_buf(),
    };
    let with_default = SeccompSettings {
        runtime_default: true,
        ..settings.clone()
    };
    let pick = |s: &Security, settings: &SeccompSettings| resolve(s, settings, "c1");
    assert_eq!(
        pick(&security(None, false), &settings),
        Ok(Choice::Unconfined)
    );
    assert_eq!(
        pick(&security(None, false), &with_default),
        Ok(Choice::RuntimeDefault)
    );
    assert_eq!(
        pick(&security(Some(("Unconfined", None)), false), &with_default),
        Ok(Choice::Unconfined)
    );
    assert_eq!(
        pick(&security(Some(("RuntimeDefault", None)), false), &settings),
        Ok(Choice::RuntimeDefault)
    );
    // containerd gives a privileged container no filter, and reads nothing for it.
    assert_eq!(
        pick(
            &security(Some(("Localhost", Some("gone.json"))), true),
            &settings
        ),
        Ok(Choice::Unconfined)
    );
    let missing = pick(
        &security(Some(("Localhost", Some("gone.json"))), false),
        &settings,
    );
    let path = dir.path().join("seccomp/gone.json");
    assert_eq!(
        missing,
        Err(format!(
            "failed to generate container \"c1\" spec: failed to generate spec: cannot load seccomp profile \"{p}\": open {p}: no such file or directory",
            p = path.display()
        ))
    );
    std::fs::create_dir_all(dir.path().join("seccomp/profiles")).unwrap();
    std::fs::write(
        dir.path().join("seccomp/profiles/deny-mkdir.json"),
        r#"{"defaultAction": "SCMP_ACT_ALLOW", "comment": "ignored", "syscalls": [
            {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}"#,
    )
    .unwrap();
    let Ok(Choice::Profile(p)) = pick(
        &security(Some(("Localhost", Some("profiles/deny-mkdir.json"))), false),
        &settings,
    ) else {
        panic!("the profile is read");
    };
    assert_eq!(verdict(&p, NATIVE, "mkdirat", a0(0)), errno(13));
    std::fs::write(dir.path().join("seccomp/bad.json"), "{not json").unwrap();
    let bad = pick(
        &security(Some(("Localhost", Some("bad.json"))), false),
        &settings,
    )
    .unwrap_err();
    assert!(bad.contains("decoding seccomp profile failed \""), "{bad}");
    let escape = pick(
        &security(Some(("Localhost", Some("../x.json"))), false),
        &settings,
    )
    .unwrap_err();
    assert!(
        escape.contains("not a descending relative path"),
        "{escape}"
    );
}
