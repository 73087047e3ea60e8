#![allow(clippy::unwrap_used)]
use super::*;

fn cfg(id: &str) -> ElectionConfig {
    ElectionConfig::with_defaults(id.into())
}

fn wall(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn holder(lease: &Lease) -> &str {
    lease
        .spec
        .as_ref()
        .unwrap()
        .holder_identity
        .as_deref()
        .unwrap()
}

fn transitions(lease: &Lease) -> i32 {
    lease.spec.as_ref().unwrap().lease_transitions.unwrap()
}

#[test]
fn defaults_are_kube_schedulers_and_client_go_refuses_inconsistent_durations() {
    let c = cfg("a");
    assert_eq!(
        (c.lease_duration, c.renew_deadline, c.retry_period),
        (
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2)
        )
    );
    assert_eq!(
        (c.namespace.as_str(), c.name.as_str()),
        ("kube-system", "mesopod")
    );
    c.check().unwrap();
    let mut bad = cfg("a");
    bad.renew_deadline = Duration::from_secs(15);
    assert_eq!(
        bad.check().unwrap_err(),
        "leaseDuration must be greater than renewDeadline"
    );
    let mut bad = cfg("a");
    bad.retry_period = Duration::from_secs(9);
    assert_eq!(
        bad.check().unwrap_err(),
        "renewDeadline must be greater than retryPeriod*JitterFactor"
    );
}

#[test]
fn a_missing_lease_is_created_with_us_as_holder_and_we_lead_once_it_is_written() {
    let t0 = Instant::now();
    let mut e = Election::new(cfg("a"));
    let (attempt, outcome) = e.attempt(t0, wall(0), None);
    let Attempt::Create(lease) = attempt else {
        panic!("{attempt:?}")
    };
    assert_eq!(outcome, Outcome::Unchanged);
    assert_eq!(holder(&lease), "a");
    assert_eq!(transitions(&lease), 0);
    assert_eq!(
        lease.spec.as_ref().unwrap().lease_duration_seconds,
        Some(15)
    );
    assert!(!e.is_leader());
    assert_eq!(e.settle(t0, Ok(7)), Outcome::Acquired { rv: 7 });
    assert!(e.is_leader());
}

#[test]
fn another_holders_lease_is_taken_only_after_it_went_unchanged_for_the_lease_duration_by_our_clock()
{
    let t0 = Instant::now();
    let mut a = Election::new(cfg("a"));
    let Attempt::Create(lease) = a.attempt(t0, wall(0), None).0 else {
        panic!()
    };
    a.settle(t0, Ok(5));

    let mut b = Election::new(cfg("b"));
    // B sees A's lease for the first time at t0 + 100s: its renewTime is old, but B's
    // own clock starts counting now.
    let seen = t0 + Duration::from_secs(100);
    assert_eq!(
        b.attempt(seen, wall(100), Some((lease.clone(), 5))).0,
        Attempt::Wait
    );
    assert_eq!(b.holder(), Some("a"));
    assert_eq!(
        b.attempt(
            seen + Duration::from_secs(14),
            wall(114),
            Some((lease.clone(), 5))
        )
        .0,
        Attempt::Wait
    );
    let (attempt, _) = b.attempt(seen + Duration::from_secs(15), wall(115), Some((lease, 5)));
    let Attempt::Update { lease: taken, rv } = attempt else {
        panic!("{attempt:?}")
    };
    assert_eq!((holder(&taken), rv, transitions(&taken)), ("b", 5, 1));
    assert_eq!(
        taken.spec.as_ref().unwrap().acquire_time,
        Some(MicroTime(apiserver::k8s_time(wall(115)).0))
    );
    assert_eq!(
        b.settle(seen + Duration::from_secs(15), Ok(9)),
        Outcome::Acquired { rv: 9 }
    );
}

#[test]
fn a_renewal_keeps_the_acquire_time_and_transitions_and_a_change_restarts_the_wait() {
    let t0 = Instant::now();
    let mut a = Election::new(cfg("a"));
    let Attempt::Create(lease) = a.attempt(t0, wall(0), None).0 else {
        panic!()
    };
    a.settle(t0, Ok(5));
    let (
        Attempt::Update {
            lease: renewed,
            rv: 5,
        },
        _,
    ) = a.attempt(
        t0 + Duration::from_secs(2),
        wall(2),
        Some((lease.clone(), 5)),
    )
    else {
        panic!()
    };
    assert_eq!(
        renewed.spec.as_ref().unwrap().acquire_time,
        lease.spec.as_ref().unwrap().acquire_time
    );
    assert_ne!(
        renewed.spec.as_ref().unwrap().renew_time,
        lease.spec.as_ref().unwrap().renew_time
    );
    assert_eq!(transitions(&renewed), 0);
    assert_eq!(
        a.settle(t0 + Duration::from_secs(2), Ok(6)),
        Outcome::Renewed { rv: 6 }
    );

    // A follower that sees the renewal (a new resourceVersion) starts counting again.
    let mut b = Election::new(cfg("b"));
    b.attempt(t0, wall(0), Some((lease, 5)));
    let later = t0 + Duration::from_secs(14);
    assert_eq!(
        b.attempt(later, wall(14), Some((renewed.clone(), 6))).0,
        Attempt::Wait
    );
    assert_eq!(
        b.attempt(
            later + Duration::from_secs(14),
            wall(28),
            Some((renewed, 6))
        )
        .0,
        Attempt::Wait
    );
}

#[test]
fn a_leader_that_cannot_renew_within_the_deadline_or_was_frozen_past_it_has_lost() {
    let t0 = Instant::now();
    let mut a = Election::new(cfg("a"));
    a.attempt(t0, wall(0), None);
    a.settle(t0, Ok(5));
    assert_eq!(
        a.settle(t0 + Duration::from_secs(9), Err(())),
        Outcome::Unchanged
    );
    assert!(a.is_leader());
    assert_eq!(
        a.settle(t0 + Duration::from_secs(11), Err(())),
        Outcome::Lost
    );
    assert!(!a.is_leader());

    // Frozen (SIGSTOP) for 30s: the first look at the clock after SIGCONT steps down.
    let mut a = Election::new(cfg("a"));
    a.attempt(t0, wall(0), None);
    a.settle(t0, Ok(5));
    assert_eq!(a.expire(t0 + Duration::from_secs(30)), Outcome::Lost);
}

#[test]
fn a_leader_that_reads_another_holder_has_lost() {
    let t0 = Instant::now();
    let mut a = Election::new(cfg("a"));
    let Attempt::Create(mut lease) = a.attempt(t0, wall(0), None).0 else {
        panic!()
    };
    a.settle(t0, Ok(5));
    lease.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let (attempt, outcome) = a.attempt(t0 + Duration::from_secs(1), wall(1), Some((lease, 8)));
    assert_eq!((attempt, outcome), (Attempt::Wait, Outcome::Lost));
    assert!(!a.is_leader());
}

#[test]
fn followers_jitter_their_rounds_and_the_leader_renews_every_retry_period() {
    let t0 = Instant::now();
    let mut a = Election::new(cfg("a"));
    assert_eq!(a.next_round_in(0.0), Duration::from_secs(2));
    assert_eq!(a.next_round_in(0.5), Duration::from_secs_f64(3.2));
    a.attempt(t0, wall(0), None);
    a.settle(t0, Ok(1));
    assert_eq!(a.next_round_in(0.9), Duration::from_secs(2));
}
