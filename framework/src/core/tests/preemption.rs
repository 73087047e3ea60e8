//! Preemption: victims chosen by kube-scheduler's rules, all or nothing,
//! and the nominated agent's room kept for its nominee.

use super::*;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use registry::Registry;

/// An unbound pod of ours asking for `cpu`, at `priority`.
fn prioritized(name: &str, cpu: &str, priority: i32) -> Arc<Pod> {
    let mut p = (*pod(name, cpu)).clone();
    p.spec.as_mut().unwrap().priority = Some(priority);
    Arc::new(p)
}

/// Queues `pod` and runs a round: what the round did.
fn attempt(core: &mut Core, pod: Arc<Pod>, now: SystemTime) -> Vec<Effect> {
    let _ = core.step(Step::Input(Input::PodUpsert(pod)), now);
    core.step(Step::Schedule, now)
}

/// What the step preempted, by victim name.
fn preempted(effects: &[Effect]) -> Vec<String> {
    writes(effects)
        .filter_map(|w| match w {
            Write::Preempt { key, .. } => Some(key.name.clone()),
            _ => None,
        })
        .collect()
}

/// The nominated node the step wrote for `name`, if any.
fn nominated(effects: &[Effect], name: &str) -> Option<String> {
    writes(effects).find_map(|w| match w {
        Write::PodStatus { key, status } if key.name == name => status.nominated_node_name.clone(),
        _ => None,
    })
}

/// The `Preempted` events' messages.
fn preempted_events(effects: &[Effect]) -> Vec<String> {
    writes(effects)
        .filter_map(|w| match w {
            Write::Event(e) if e.reason.as_deref() == Some("Preempted") => e.message.clone(),
            _ => None,
        })
        .collect()
}

/// A core with `hosts` (4 cpus each) full of 1-cpu pods at `priority`,
/// named `<host>-<n>`.
fn full(hosts: &[&str], priority: i32) -> (Core, Vec<(String, TaskId)>) {
    let mut core = cluster(hosts);
    let pods = hosts
        .iter()
        .flat_map(|h| (0..4).map(move |i| prioritized(&format!("{h}-{i}"), "1", priority)))
        .collect();
    let tasks = run(&mut core, pods, at(1));
    assert_eq!(tasks.len(), hosts.len() * 4, "every agent is full");
    (core, tasks)
}

#[test]
fn a_full_agent_gives_up_exactly_the_lowest_pod_the_urgent_one_needs() {
    let mut core = cluster(&["h1"]);
    // Three 1-cpu pods at 10, one at 5: the agent is full.
    let mut pods: Vec<Arc<Pod>> = (0..3)
        .map(|i| prioritized(&format!("mid-{i}"), "1", 10))
        .collect();
    pods.push(prioritized("low", "1", 5));
    assert_eq!(run(&mut core, pods, at(1)).len(), 4);

    let effects = attempt(&mut core, prioritized("urgent", "1", 1000), at(2));
    assert_eq!(preempted(&effects), ["low"], "one victim, the lowest");
    assert_eq!(
        preempted_events(&effects),
        ["Preempted by pod uid-urgent on node h1"]
    );
    assert_eq!(nominated(&effects, "urgent").as_deref(), Some("h1"));
    // Nominated: no second plan while the victim stops.
    let effects = core.step(Step::Schedule, at(40));
    assert!(preempted(&effects).is_empty(), "{:?}", describe(&effects));
}

#[test]
fn a_pod_that_may_not_preempt_or_outranks_nobody_stops_nothing() {
    let (mut core, _) = full(&["h1"], 10);
    let mut never = (*prioritized("never", "1", 1000)).clone();
    never.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    let _ = core.step(Step::Input(Input::PodUpsert(Arc::new(never))), at(2));
    let _ = core.step(
        Step::Input(Input::PodUpsert(prioritized("peer", "1", 10))),
        at(2),
    );
    assert!(preempted(&core.step(Step::Schedule, at(2))).is_empty());
    // An offer with nothing in it: both are tried, and still nothing goes.
    let _ = core.step(offers(vec![offer("h1", 0.0)]), at(3));
    let effects = core.step(Step::Schedule, at(3));
    assert!(preempted(&effects).is_empty(), "{:?}", describe(&effects));
}

#[test]
fn a_plan_that_cannot_free_enough_stops_nobody() {
    let mut core = cluster(&["h1"]);
    // Two 1-cpu pods at 10 and two at 2000: only 2 cpus are below the
    // preemptor, which needs 3.
    let mut pods: Vec<Arc<Pod>> = (0..2)
        .map(|i| prioritized(&format!("low-{i}"), "1", 10))
        .collect();
    pods.extend((0..2).map(|i| prioritized(&format!("top-{i}"), "1", 2000)));
    assert_eq!(run(&mut core, pods, at(1)).len(), 4);
    let effects = attempt(&mut core, prioritized("big", "3", 1000), at(2));
    assert!(preempted(&effects).is_empty(), "{:?}", describe(&effects));
}

#[test]
fn the_agent_chosen_breaks_fewest_budgets_then_takes_the_lowest_priorities() {
    // Four pods at 1 and four at 5 fill h1 and h2.
    let mut core = cluster(&["h1", "h2"]);
    let mut pods: Vec<Arc<Pod>> = (0..4)
        .map(|i| prioritized(&format!("one-{i}"), "1", 1))
        .collect();
    pods.extend((0..4).map(|i| prioritized(&format!("five-{i}"), "1", 5)));
    assert_eq!(run(&mut core, pods, at(1)).len(), 8);
    let victims = preempted(&attempt(&mut core, prioritized("a", "1", 100), at(2)));
    assert_eq!(victims.len(), 1);
    assert!(
        victims[0].starts_with("one-"),
        "the lowest priority goes: {victims:?}"
    );

    // …unless a budget protects them: then the other agent's pods go.
    let (mut core, tasks) = full(&["h1", "h2"], 1);
    let on = |core: &Core, host: &str| -> Vec<String> {
        tasks
            .iter()
            .filter(|(_, id)| {
                core.registry
                    .get(id)
                    .unwrap()
                    .spec
                    .as_ref()
                    .unwrap()
                    .hostname
                    == host
            })
            .map(|(n, _)| n.clone())
            .collect()
    };
    let protected = on(&core, "h1");
    let mut budget: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "h1-pods", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"team": "h1"}}},
    }))
    .unwrap();
    budget.status = Some(PodDisruptionBudgetStatus {
        disruptions_allowed: 0,
        ..Default::default()
    });
    let _ = core.step(
        Step::Input(Input::DisruptionBudget {
            budget: Arc::new(budget),
            deleted: false,
        }),
        at(2),
    );
    // The budget selects h1's pods by label: label the running tasks' pods
    // as the registry knows them.
    for (name, id) in &tasks {
        if protected.contains(name) {
            let mut t = core.registry.get(id).unwrap();
            let mut p = (*prioritized(name, "1", 1)).clone();
            p.metadata.labels = Some([("team".to_owned(), "h1".to_owned())].into());
            t.set_pod(Arc::new(p)).unwrap();
            t.release_pod();
            core.registry.update(t).unwrap();
        }
    }
    let effects = attempt(&mut core, prioritized("b", "1", 100), at(3));
    let victims = preempted(&effects);
    assert_eq!(victims.len(), 1, "{:?}", describe(&effects));
    assert!(
        on(&core, "h2").contains(&victims[0]),
        "h1's pods are protected: {victims:?}"
    );
}

#[test]
fn the_nominated_agent_is_held_for_its_nominee_against_lower_pods() {
    let (mut core, tasks) = full(&["h1"], 1);
    let effects = attempt(&mut core, prioritized("urgent", "1", 100), at(2));
    let victims = preempted(&effects);
    assert_eq!(victims.len(), 1);
    // The victim's delete arrives, its task is killed and ends.
    let victim = &tasks.iter().find(|(n, _)| *n == victims[0]).unwrap().1;
    let mut deleting = (*prioritized(&victims[0], "1", 1)).clone();
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::podstatus::timestamp(at(3))),
    );
    deleting.metadata.deletion_grace_period_seconds = Some(0);
    deleting.spec.as_mut().unwrap().node_name = Some("h1".into());
    let effects = core.step(Step::Input(Input::PodUpsert(Arc::new(deleting))), at(3));
    assert!(
        describe(&effects).contains(&format!("KILL {}", victim.value)),
        "{:?}",
        describe(&effects)
    );
    let effects = core.step(update(status(victim, TaskState::TaskKilled, true)), at(4));
    for step in written(&effects, true) {
        let _ = core.step(step, at(4));
    }
    // A lower pod arrived meanwhile, ahead in time; the freed cpu comes back.
    let _ = core.step(
        Step::Input(Input::PodUpsert(prioritized("batch", "1", 1))),
        at(4),
    );
    let _ = core.step(
        offers(vec![Offer {
            id: Some(OfferId::new("freed-h1")),
            ..offer("h1", 1.0)
        }]),
        at(5),
    );
    let effects = core.step(Step::Schedule, at(5));
    let placed: Vec<String> = rounds(&effects)
        .into_iter()
        .flatten()
        .map(|b| format!("{} on {}", b.key.name, b.offer.value))
        .collect();
    assert_eq!(placed, ["urgent on freed-h1"], "{:?}", describe(&effects));
}

#[test]
fn no_pod_is_stopped_while_room_is_on_its_way_back() {
    // h1 runs one 1-cpu pod of 4: the rest is somewhere between an ACCEPT's
    // leftovers and the next offer, not held by anything of ours.
    let mut core = cluster(&["h1"]);
    assert_eq!(
        run(&mut core, vec![prioritized("low", "1", 1)], at(1)).len(),
        1
    );
    let effects = attempt(&mut core, prioritized("urgent", "2", 100), at(2));
    assert!(preempted(&effects).is_empty(), "{:?}", describe(&effects));
}

#[test]
fn an_offer_made_before_the_victims_ended_goes_back_so_the_room_comes_whole() {
    let mut core = cluster(&["h1"]);
    let tasks = run(
        &mut core,
        (0..3)
            .map(|i| prioritized(&format!("low-{i}"), "1", 1))
            .collect(),
        at(1),
    );
    // What the round left: 1 cpu, offered again.
    let left = Offer {
        id: Some(OfferId::new("left-h1")),
        ..offer("h1", 1.0)
    };
    let _ = core.step(offers(vec![left]), at(2));
    let effects = attempt(&mut core, prioritized("urgent", "2", 100), at(2));
    let victims = preempted(&effects);
    assert_eq!(
        victims.len(),
        1,
        "1 cpu free and 1 freed: {:?}",
        describe(&effects)
    );
    let victim = &tasks.iter().find(|(n, _)| *n == victims[0]).unwrap().1;
    // Its task ends: the 1-cpu offer, made before, goes back at once.
    let effects = core.step(update(status(victim, TaskState::TaskKilled, true)), at(3));
    assert!(
        describe(&effects).contains(&"DECLINE left-h1".to_owned()),
        "{:?}",
        describe(&effects)
    );
    // The master offers the agent's room whole: the nominee fits it.
    let whole = Offer {
        id: Some(OfferId::new("whole-h1")),
        ..offer("h1", 2.0)
    };
    let _ = core.step(offers(vec![whole]), at(4));
    let effects = core.step(Step::Schedule, at(4));
    assert!(
        describe(&effects).contains(&"launch urgent on whole-h1".to_owned()),
        "{:?}",
        describe(&effects)
    );
}

#[test]
fn where_our_executor_runs_its_resources_are_not_asked_again() {
    // An executor of 500m: on an agent of 4 cpus, three pods of 1100m leave
    // 200m, and no offer is out.
    let executor = mesos::proto::ExecutorInfo {
        resources: vec![
            mesos::resources::scalar("cpus", 0.5, None),
            mesos::resources::scalar("mem", 32.0, None),
        ],
        ..Default::default()
    };
    let pipeline = PipelineConfig {
        executor,
        ..PipelineConfig::default()
    };
    let mut core = Core::new(CoreConfig {
        registry: InMemoryRegistry::new(),
        placer: Placer::new(default_pipeline(&pipeline).unwrap(), Scoring::default()),
        admission: Admission::none(),
        needs: procurement::PodResourcesProcurement::new(ResourceDefaults::default()).unwrap(),
        config: SchedulingConfig::default(),
        lookup: Box::new(Empty),
        directory: Arc::default(),
        observed: Arc::default(),
    });
    let _ = core.step(subscribed(), at(0));
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(0));
    let low = (0..3)
        .map(|i| prioritized(&format!("low-{i}"), "1100m", 1))
        .collect();
    assert_eq!(run(&mut core, low, at(1)).len(), 3);
    // One victim frees 1100m, all the urgent pod asks: the executor is
    // there already and needs nothing more.
    let effects = attempt(&mut core, prioritized("urgent", "1100m", 100), at(2));
    assert_eq!(preempted(&effects).len(), 1, "{:?}", describe(&effects));
}
