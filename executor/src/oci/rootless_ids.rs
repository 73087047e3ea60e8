//! Which ids a rootless executor's user namespace maps.
//!
//! An unprivileged process may map only its own uid and gid (to 0): the
//! single-id mapping, under which a container can run as root and nothing
//! else. Where the agent's user has a subordinate id range
//! (`/etc/subuid`, `/etc/subgid`) and Debian's `uidmap` is installed, the
//! setuid helpers `newuidmap` and `newgidmap` (which need the user in
//! `/etc/passwd`) map that range too (0 is the
//! user, 1… the range), as rootless Podman and runc setups do; then
//! `runAsUser`, `runAsGroup` and supplemental groups within it work. A
//! container whose ids the mapping lacks is refused with the reason.

use std::path::Path;
use std::process::Command;

/// The setuid helpers of Debian's `uidmap`.
const NEWUIDMAP: &str = "/usr/bin/newuidmap";
const NEWGIDMAP: &str = "/usr/bin/newgidmap";

/// A subordinate range: its first host id and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) start: u32,
    pub(crate) count: u32,
}

/// This user's subordinate uid and gid ranges, when it has both and the
/// helpers are installed.
pub(crate) fn subordinate() -> Option<(Range, Range)> {
    if !Path::new(NEWUIDMAP).exists() || !Path::new(NEWGIDMAP).exists() {
        return None;
    }
    let uid = rustix::process::geteuid().as_raw();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let name = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2].parse::<u32>().ok() == Some(uid)).then(|| f[0].to_owned())
    });
    let read = |f: &str| std::fs::read_to_string(f).unwrap_or_default();
    // Both files name the user (newgidmap checks the caller's user name
    // or uid in /etc/subgid too); the helpers need a passwd entry.
    let name = name?;
    Some((
        range_of(&read("/etc/subuid"), uid, Some(&name))?,
        range_of(&read("/etc/subgid"), uid, Some(&name))?,
    ))
}

/// The first range of `/etc/subuid` text `db` for `id` or `name`.
fn range_of(db: &str, id: u32, name: Option<&str>) -> Option<Range> {
    db.lines().find_map(|l| {
        let f: Vec<&str> = l.trim().split(':').collect();
        let owner = f.first()?;
        let ours = *owner == id.to_string().as_str() || Some(*owner) == name;
        let (start, count) = (f.get(1)?.parse().ok()?, f.get(2)?.parse().ok()?);
        (ours && f.len() == 3 && count > 0).then_some(Range { start, count })
    })
}

/// Maps process `pid`'s new user namespace: 0 is this user, 1… the
/// subordinate ranges, through `newuidmap` and `newgidmap`.
pub(crate) fn map_with_helpers(pid: u32, (uids, gids): (Range, Range)) -> Result<(), String> {
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    for (helper, own, r) in [(NEWUIDMAP, uid, uids), (NEWGIDMAP, gid, gids)] {
        let out = Command::new(helper)
            .arg(pid.to_string())
            .args(["0", &own.to_string(), "1", "1"])
            .args([r.start.to_string(), r.count.to_string()])
            .output()
            .map_err(|e| format!("cannot run {helper}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{helper} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// Why a container's `uid`, `gid` and supplemental `groups` cannot run
/// under a namespace whose `/proc/<pid>/{uid_map,gid_map,setgroups}` read
/// as given, if they cannot.
pub(crate) fn unmapped(
    maps: (&str, &str, &str),
    uid: u32,
    gid: u32,
    groups: &[u32],
) -> Option<String> {
    let (uids, gids, setgroups) = maps;
    let groups_ok = groups.is_empty()
        || (setgroups.trim() == "allow" && groups.iter().all(|g| mapped(gids, *g)));
    if mapped(uids, uid) && mapped(gids, gid) && groups_ok {
        return None;
    }
    let single = uids.lines().filter(|l| !l.trim().is_empty()).count() <= 1;
    Some(format!(
        "rootless: the agent's user namespace maps only {} (uid_map {:?}), so uid {uid}, gid {gid} \
         and supplemental groups {groups:?} cannot be used; run the agent as root, or give its user \
         a subordinate id range that holds them (/etc/subuid and /etc/subgid, with newuidmap from uidmap)",
        if single {
            "uid 0 and gid 0 (the agent's own user)"
        } else {
            "uid 0 (the agent's user) and its subordinate ids"
        },
        uids.split_whitespace().collect::<Vec<_>>().join(" ")
    ))
}

/// [`unmapped`] for this process' own user namespace.
pub(crate) fn unmapped_here(uid: u32, gid: u32, groups: &[u32]) -> Option<String> {
    let read = |f: &str| std::fs::read_to_string(format!("/proc/self/{f}")).unwrap_or_default();
    let (u, g, s) = (read("uid_map"), read("gid_map"), read("setgroups"));
    unmapped((&u, &g, &s), uid, gid, groups)
}

/// Whether this process may set its supplemental groups (its user
/// namespace allows setgroups).
pub(crate) fn setgroups_allowed() -> bool {
    std::fs::read_to_string("/proc/self/setgroups").is_ok_and(|s| s.trim() == "allow")
}

/// Whether `id` is inside a range of a `/proc/<pid>/uid_map` text.
fn mapped(map: &str, id: u32) -> bool {
    map.lines().any(|l| {
        let n: Vec<u64> = l
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        n.len() == 3 && (n[0]..n[0] + n[2]).contains(&u64::from(id))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_mapped_only_inside_a_range() {
        let single = "         0      41616          1\n";
        assert!(mapped(single, 0));
        assert!(!mapped(single, 1000));
        let ranges = "0 41616 1\n1 100000 65536\n";
        assert!(mapped(ranges, 1000));
        assert!(mapped(ranges, 65536));
        assert!(!mapped(ranges, 65537));
        assert!(!mapped("", 0));
    }

    #[test]
    fn a_uid_outside_the_mapping_is_refused_with_the_mapping() {
        let single = ("0 41616 1\n", "0 41616 1\n", "deny\n");
        assert_eq!(unmapped(single, 0, 0, &[]), None);
        let why = unmapped(single, 1000, 0, &[]).unwrap_or_default();
        assert!(
            why.contains("uid 1000") && why.contains("uid 0 and gid 0"),
            "{why}"
        );
        // Groups need setgroups, which the single-id mapping denies.
        assert!(unmapped(single, 0, 0, &[0]).is_some());
        let ranges = (
            "0 41616 1\n1 100000 65536\n",
            "0 41616 1\n1 100000 65536\n",
            "allow\n",
        );
        assert_eq!(unmapped(ranges, 1000, 1000, &[2000]), None);
        let why = unmapped(ranges, 70000, 0, &[]).unwrap_or_default();
        assert!(why.contains("subordinate ids"), "{why}");
    }

    #[test]
    fn subordinate_ranges_are_found_by_name_or_uid() {
        let db = "alice:100000:65536\n41616:165536:1000\nbad:x:1\nzero:1:0\n";
        assert_eq!(
            range_of(db, 5, Some("alice")),
            Some(Range {
                start: 100_000,
                count: 65_536
            })
        );
        assert_eq!(
            range_of(db, 41_616, None),
            Some(Range {
                start: 165_536,
                count: 1000
            })
        );
        assert_eq!(range_of(db, 7, Some("bad")), None);
        assert_eq!(range_of(db, 7, Some("zero")), None);
        assert_eq!(range_of(db, 7, None), None);
    }
}
