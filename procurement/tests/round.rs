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
