#![allow(clippy::unwrap_used)]
use super::*;
use crate::pod::PodPlan;

fn plan(container: serde_json::Value) -> ContainerPlan {
    let pod = serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [container]}});
    PodPlan::from_task_data(Some(&serde_json::to_vec(&pod).unwrap()))
        .unwrap()
        .containers
        .remove(0)
}

fn image() -> ImageConfig {
    ImageConfig {
        entrypoint: Some(vec!["/ep".into()]),
        cmd: Some(vec!["cmd".into()]),
        env: Some(vec!["PATH=/img".into(), "A=image".into()]),
        working_dir: Some("/work".into()),
        user: None,
    }
}

fn build_with(
    c: serde_json::Value,
    img: &ImageConfig,
    privileged_ok: bool,
) -> Result<Spec, String> {
    let cx = BundleContext {
        hostname: "p",
        pod_ref: "p_default(u)".into(),
        rootfs: Path::new("/nonexistent"),
        cgroups_path: "mesopod/x".into(),
        allow_privileged: privileged_ok,
        env: &[("A".into(), "pod".into())],
        join: &[],
        mounts: &[],
        seccomp: &crate::oci::seccomp::Choice::Unconfined,
    };
    build(&plan(c), img, &cx)
}

#[test]
fn command_and_args_follow_kubernetes_table() {
    let img = image();
    let argv = |c| argv(&plan(c), &img).unwrap();
    let base = serde_json::json!({"name": "c", "image": "i"});
    assert_eq!(argv(base.clone()), ["/ep", "cmd"]);
    let mut c = base.clone();
    c["command"] = serde_json::json!(["/bin/x"]);
    assert_eq!(argv(c.clone()), ["/bin/x"]);
    c["args"] = serde_json::json!(["y"]);
    assert_eq!(argv(c), ["/bin/x", "y"]);
    let mut c = base;
    c["args"] = serde_json::json!(["z"]);
    assert_eq!(argv(c.clone()), ["/ep", "z"]);
    let empty = ImageConfig {
        entrypoint: Some(vec![String::new()]),
        cmd: None,
        ..image()
    };
    assert_eq!(
        argv_err(&plan(serde_json::json!({"name": "c"})), &empty),
        "no command specified"
    );
}

fn argv_err(p: &ContainerPlan, img: &ImageConfig) -> String {
    argv(p, img).unwrap_err()
}

#[test]
fn env_workdir_user_and_security_become_the_config() {
    let spec = build_with(
        serde_json::json!({"name": "c", "image": "i", "securityContext": {
            "runAsUser": 1000, "runAsGroup": 2000, "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false,
            "capabilities": {"add": ["NET_ADMIN"], "drop": ["CHOWN"]}},
            "resources": {"limits": {"memory": "64Mi", "cpu": "500m"}, "requests": {"cpu": "250m"}}}),
        &image(),
        false,
    )
    .unwrap();
    let p = &spec.process;
    assert!(
        p.env.contains(&"A=pod".to_owned()) && p.env.contains(&"PATH=/img".to_owned()),
        "{:?}",
        p.env
    );
    assert!(p.env.contains(&"HOSTNAME=p".to_owned()));
    assert_eq!(p.cwd, "/work");
    assert_eq!((p.user.uid, p.user.gid), (1000, 2000));
    assert!(p.no_new_privileges && spec.root.readonly);
    let caps = &p.capabilities.as_ref().unwrap().bounding;
    assert!(caps.contains(&"CAP_NET_ADMIN".to_owned()) && !caps.contains(&"CAP_CHOWN".to_owned()));
    assert!(caps.contains(&"CAP_KILL".to_owned()) && !caps.contains(&"CAP_SYS_ADMIN".to_owned()));
    let res = spec.linux.resources.unwrap();
    assert_eq!(res.memory.unwrap().limit, Some(64 * 1024 * 1024));
    let cpu = res.cpu.unwrap();
    assert_eq!(
        (cpu.quota, cpu.period, cpu.shares),
        (Some(50_000), Some(100_000), Some(256))
    );
}

#[test]
fn the_seccomp_choice_becomes_linux_seccomp_for_the_containers_capabilities() {
    let cx = |choice| BundleContext {
        hostname: "p",
        pod_ref: "p_default(u)".into(),
        rootfs: Path::new("/nonexistent"),
        cgroups_path: "mesopod/x".into(),
        allow_privileged: false,
        env: &[],
        join: &[],
        mounts: &[],
        seccomp: choice,
    };
    let admin = plan(serde_json::json!({"name": "c", "image": "i",
        "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}));
    let allows = |s: &Spec, name: &str| {
        s.linux.seccomp.as_ref().unwrap().syscalls.iter().any(|r| {
            r.action == "SCMP_ACT_ALLOW" && r.args.is_empty() && r.names.iter().any(|n| n == name)
        })
    };
    let confined = build(
        &admin,
        &image(),
        &cx(&crate::oci::seccomp::Choice::RuntimeDefault),
    )
    .unwrap();
    assert!(allows(&confined, "unshare") && allows(&confined, "read"));
    let json = serde_json::to_value(&confined).unwrap();
    assert_eq!(json["linux"]["seccomp"]["defaultAction"], "SCMP_ACT_ERRNO");
    let plain = plan(serde_json::json!({"name": "c", "image": "i"}));
    let default_caps = build(
        &plain,
        &image(),
        &cx(&crate::oci::seccomp::Choice::RuntimeDefault),
    )
    .unwrap();
    assert!(!allows(&default_caps, "unshare"));
    let open = build(
        &plain,
        &image(),
        &cx(&crate::oci::seccomp::Choice::Unconfined),
    )
    .unwrap();
    assert!(open.linux.seccomp.is_none());
    assert!(
        serde_json::to_value(&open).unwrap()["linux"]
            .get("seccomp")
            .is_none()
    );
}

#[test]
fn non_root_and_privileged_are_checked_with_kubelets_words() {
    let nonroot =
        serde_json::json!({"name": "c", "image": "i", "securityContext": {"runAsNonRoot": true}});
    let err = build_with(nonroot.clone(), &image(), false).unwrap_err();
    assert!(
        err.starts_with("container has runAsNonRoot and image will run as root"),
        "{err}"
    );
    let named = ImageConfig {
        user: Some("app".into()),
        ..image()
    };
    let err = build_with(nonroot, &named, false).unwrap_err();
    assert!(
        err.contains("image has non-numeric user (app), cannot verify user is non-root"),
        "{err}"
    );
    let zero = serde_json::json!({"name": "c", "image": "i", "securityContext": {"runAsNonRoot": true, "runAsUser": 0}});
    assert!(
        build_with(zero, &image(), false)
            .unwrap_err()
            .contains("container's runAsUser breaks non-root policy")
    );
    let privileged =
        serde_json::json!({"name": "c", "image": "i", "securityContext": {"privileged": true}});
    assert!(
        build_with(privileged.clone(), &image(), false)
            .unwrap_err()
            .contains("--allow-privileged")
    );
    let spec = build_with(privileged, &image(), true).unwrap();
    assert!(
        spec.process
            .capabilities
            .unwrap()
            .bounding
            .contains(&"CAP_SYS_ADMIN".to_owned())
    );
}
