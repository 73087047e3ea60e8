#![allow(clippy::unwrap_used)]
use super::*;

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Kubernetes' own expansion rules, case by case (from the behaviour of
/// `expansion.Expand` and its mapping: an undefined name stays `$(NAME)`).
#[test]
fn expansion_follows_kubernetes_exactly() {
    let env = vars(&[("A", "a"), ("B", "b"), ("REF", "$(A)"), ("EMPTY", "")]);
    let cases = [
        ("$(A)", "a"),
        ("$(A)-$(A)", "a-a"),
        ("x$(B)y", "xby"),
        ("$(A)_$(B)", "a_b"),
        // `$$` is one `$`, so `$$(A)` is not a reference.
        ("$$(B)_$(A)", "$(B)_a"),
        ("f-$$A", "f-$A"),
        ("$$$$$$(NOPE)", "$$$(NOPE)"),
        ("$$$$$$(A)", "$$$(A)"),
        ("$$$$$$$(NOPE)", "$$$$(NOPE)"),
        ("$$$$$$$(A)", "$$$a"),
        // Backslashes are not escapes.
        ("x\\$(A)y", "x\\ay"),
        // A value is never expanded again.
        ("$(REF)", "$(A)"),
        ("%$(REF)-$(REF)%", "%$(A)-$(A)%"),
        ("x$(EMPTY)y", "xy"),
        // Undefined, unterminated, bare and shell forms stay as written.
        ("$(NOPE)", "$(NOPE)"),
        ("$(A$(B))", "$(A$(B))"),
        ("$(A$(B)", "$(A$(B)"),
        ("x$(Awhoops", "x$(Awhoops"),
        ("$(B)__$(A", "b__$(A"),
        ("$(B)__$(", "b__$("),
        ("--$($($(--", "--$($($(--"),
        ("$A", "$A"),
        ("$A)", "$A)"),
        ("${A}", "${A}"),
        ("$?_$!", "$?_$!"),
        ("$(A)end$", "aend$"),
        ("$", "$"),
        ("$é$(A)", "$éa"),
        ("$(x$$y)", "$(x$$y)"),
        ("\n", "\n"),
        ("", ""),
    ];
    for (input, want) in cases {
        assert_eq!(
            expand(input, &env, usize::MAX).as_deref(),
            Some(want),
            "{input:?}"
        );
    }
}

#[test]
fn later_entries_win_and_the_bound_is_exact() {
    let env = vars(&[("A", "old"), ("A", "new")]);
    assert_eq!(expand("$(A)", &env, 3).as_deref(), Some("new"));
    assert_eq!(expand("$(A)!", &env, 3), None, "4 bytes do not fit in 3");
    assert_eq!(expand("$(NOPE)", &env, 6), None, "undefined refs count too");
    assert_eq!(expand("$(NOPE)", &env, 7).as_deref(), Some("$(NOPE)"));
}

fn doubling_chain(n: usize, first: usize) -> Vec<(String, String)> {
    let mut chain = vec![("V0".to_owned(), "x".repeat(first))];
    for i in 1..n {
        chain.push((format!("V{i}"), format!("$(V{})$(V{})", i - 1, i - 1)));
    }
    chain
}

/// The bomb: 18 variables, each twice the one before. Built
/// unbounded it reaches 4 KiB × 2^17 = 512 MiB in the last one; here the
/// first value past `MAX_ARG_STRLEN` stops it, before it is allocated.
#[test]
fn a_doubling_chain_stops_at_the_first_string_past_max_arg_strlen() {
    let limits = ExecLimits {
        total: 6 << 20,
        string: MAX_ARG_STRLEN,
    };
    let mut env = EnvBuilder::new(limits);
    let mut failed = None;
    for (name, value) in doubling_chain(18, 4096) {
        if let Err(e) = env.set_expanded(&name, &value) {
            failed = Some(e);
            break;
        }
    }
    // V4 is 64 KiB; V5 would be 128 KiB, past 131072 with `V5=` and NUL.
    assert_eq!(
        failed,
        Some(ExecLimitError::StringTooLong {
            what: "env var \"V5\"".into(),
            limit: MAX_ARG_STRLEN
        })
    );
    assert_eq!(
        failed.unwrap().to_string(),
        "env var \"V5\" would be longer than 131072 bytes, the most the kernel takes in one string (MAX_ARG_STRLEN)"
    );
    assert!(env.used() < 4096 * 32, "{}", env.used());
    let vars = env.into_vars();
    assert_eq!(vars.len(), 5, "V5 was not set");
}

/// Many values each within a string but together past `ARG_MAX`.
#[test]
fn the_total_stops_at_arg_max_naming_the_variable() {
    let limits = ExecLimits {
        total: 1 << 20,
        string: MAX_ARG_STRLEN,
    };
    let mut env = EnvBuilder::new(limits);
    env.set_expanded("BIG", &"y".repeat(100_000)).unwrap();
    let mut n = 0;
    let err = loop {
        n += 1;
        if let Err(e) = env.set_expanded(&format!("COPY{n}"), "$(BIG)") {
            break e;
        }
    };
    // 1 MiB holds BIG and nine copies, not ten.
    assert_eq!(n, 10);
    assert_eq!(
        err,
        ExecLimitError::TooLarge {
            what: "env var \"COPY10\"".into(),
            limit: 1 << 20
        }
    );
    assert!(env.used() <= 1 << 20);
    // A variable set again frees its old value's bytes.
    env.set("COPY1".into(), String::new()).unwrap();
    env.set_expanded("COPY10", "$(BIG)").unwrap();
    // A plain value (from a ConfigMap, a field) is checked the same way.
    assert!(matches!(
        env.set("HUGE".into(), "z".repeat(MAX_ARG_STRLEN)),
        Err(ExecLimitError::StringTooLong { .. })
    ));
}

#[test]
fn command_and_args_get_what_the_environment_leaves() {
    let limits = ExecLimits {
        total: 64 * 1024,
        string: 32 * 1024,
    };
    let env = vars(&[("A", &"a".repeat(10_000))]);
    let cmd = vec!["echo".to_owned(), "$(A)$$(A)".to_owned()];
    let (c, a) = expand_argv(Some(&cmd), None, &env, limits).unwrap();
    assert_eq!(c.unwrap()[1], format!("{}$(A)", "a".repeat(10_000)));
    assert_eq!(a, None);
    // One argument of four copies is past the string limit.
    let args = vec!["$(A)$(A)$(A)$(A)".to_owned()];
    assert_eq!(
        expand_argv(Some(&cmd), Some(&args), &env, limits).unwrap_err(),
        ExecLimitError::StringTooLong {
            what: "args[0]".into(),
            limit: 32 * 1024
        }
    );
    // Many arguments of two copies each pass the total.
    let args = vec!["$(A)$(A)".to_owned(); 3];
    assert_eq!(
        expand_argv(None, Some(&args), &env, limits).unwrap_err(),
        ExecLimitError::TooLarge {
            what: "args[2]".into(),
            limit: 64 * 1024
        }
    );
}

#[test]
fn arg_max_is_the_kernels_rule() {
    // A quarter of the stack rlimit…
    assert_eq!(ExecLimits::arg_max(Some(8 << 20)), 2 << 20);
    // …at most 3/4 of _STK_LIM (unlimited stacks included)…
    assert_eq!(ExecLimits::arg_max(Some(64 << 20)), 6 << 20);
    assert_eq!(ExecLimits::arg_max(None), 6 << 20);
    // …and never under 32 pages.
    assert_eq!(ExecLimits::arg_max(Some(64 << 10)), 128 << 10);
    let here = ExecLimits::of_this_process();
    assert!((128 << 10..=6 << 20).contains(&here.total), "{here:?}");
    assert_eq!(here.string, MAX_ARG_STRLEN);
}
