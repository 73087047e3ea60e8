//! A round over a cluster larger than the sample: the cursor decides where
//! each pod's sample starts, and later pods see what earlier ones left.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use procurement::{
    Cursor, MAX_CANDIDATES, OfferView, PipelineConfig, Placer, Scoring, default_pipeline,
};
use serde_json::{Value, json};

fn pod(cpu: &str) -> registry::PodTask {
    task(
        json!({"containers": [container("c", json!({"cpu": cpu, "memory": "100Mi"}), Value::Null, Value::Null)]}),
        Value::Null,
    )
}

fn cluster(n: usize) -> Vec<OfferView> {
    (0..n)
        .map(|i| {
            let o = offer(
                &format!("h{i:03}"),
                vec![scalar("cpus", 1.0, None), scalar("mem", 1000.0, None)],
                vec![],
            );
            OfferView::new(&o).unwrap()
        })
        .collect()
}

fn placer() -> Placer {
    Placer::new(
        default_pipeline(&PipelineConfig::default()).unwrap(),
        Scoring::default(),
    )
}

fn host(p: &procurement::Placement) -> String {
    p.task.spec.as_ref().unwrap().hostname.clone()
}

#[test]
fn with_more_feasible_offers_than_the_sample_the_cursor_picks_where_the_sample_starts() {
    let views = cluster(MAX_CANDIDATES + 36);
    let t = pod("500m");
    // Every offer scores the same: the tie goes to the lowest hostname of
    // the sample, which is where the sample starts.
    let mut cursor = Cursor(10);
    let round = placer().place_round([&t], &views, &mut cursor);
    assert_eq!(host(round[0].as_ref().unwrap()), "h010");
    assert_eq!(cursor, Cursor(11), "one scan moves the cursor on by one");
    // A sample that wraps round the end holds h000.
    let mut cursor = Cursor(90);
    let round = placer().place_round([&t], &views, &mut cursor);
    assert_eq!(host(round[0].as_ref().unwrap()), "h000");
}

#[test]
fn later_pods_of_a_round_see_what_earlier_ones_left() {
    let views = cluster(2);
    let (a, b, c) = (pod("600m"), pod("600m"), pod("600m"));
    let round = placer().place_round([&a, &b, &c], &views, &mut Cursor::default());
    let hosts: Vec<_> = round.iter().map(|r| r.as_ref().map(host)).collect();
    assert_eq!(hosts[0].as_deref(), Ok("h000"));
    assert_eq!(hosts[1].as_deref(), Ok("h001"), "h000 has 0.4 cpus left");
    let e = round[2].as_ref().unwrap_err();
    assert_eq!(e.agents, 2);
    assert_eq!(e.to_string(), "0/2 agents available: 2 insufficient cpus.");
}

#[test]
fn a_held_offer_goes_only_to_the_pods_allowed_it_and_others_count_only_what_they_may_use() {
    let views = cluster(2);
    let nominee = task(
        json!({"priority": 100, "containers": [container("c", json!({"cpu": "600m", "memory": "100Mi"}), Value::Null, Value::Null)]}),
        Value::Null,
    );
    let (other, third) = (pod("600m"), pod("600m"));
    // h000 is held for the nominee (the one pod of priority 100 here): the
    // others may not use it.
    let may_use =
        |t: &registry::PodTask, v: &OfferView| v.node().hostname() != "h000" || t.priority() > 0;
    let round = placer().place_round_where(
        [&other, &nominee, &third],
        &views,
        &mut Cursor::default(),
        Some(&may_use),
    );
    let hosts: Vec<_> = round.iter().map(|r| r.as_ref().map(host)).collect();
    assert_eq!(
        hosts[0].as_deref(),
        Ok("h001"),
        "the held h000 is not the other pod's"
    );
    assert_eq!(
        hosts[1].as_deref(),
        Ok("h000"),
        "the nominee lands on its agent"
    );
    let e = round[2].as_ref().unwrap_err();
    assert_eq!(e.agents, 1, "the held offer is not counted as tried");
    assert_eq!(e.to_string(), "0/1 agents available: 1 insufficient cpus.");
    // Nothing allowed at all: a failure that tried nothing, not a panic.
    let none = |_: &registry::PodTask, _: &OfferView| false;
    let round = placer().place_round_where([&other], &views, &mut Cursor(3), Some(&none));
    assert_eq!(round[0].as_ref().unwrap_err().agents, 0);
}
