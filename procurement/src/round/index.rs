//! Which offers' nodes carry a label, for pods with a `nodeSelector`.
//!
//! A pod that selects `zone=z3` in a cluster of ten zones fails on nine
//! offers in ten; trying each of them (a state, a pipeline run, an error)
//! was most of a scheduling round's time. When the pipeline refuses every
//! node that lacks a selector entry ([`crate::Procurement::
//! enforces_node_selector`]), the round tries only the offers whose node
//! carries the pod's rarest entry; the pipeline still checks everything.

use std::collections::HashMap;

use crate::offer::OfferView;

/// Offer indices by node label (key, then value), built once per round on
/// first use.
pub(super) struct SelectorIndex<'v> {
    by_label: HashMap<&'v str, HashMap<&'v str, Vec<usize>>>,
}

impl<'v> SelectorIndex<'v> {
    pub(super) fn new(views: &'v [OfferView]) -> Self {
        let mut by_label: HashMap<&str, HashMap<&str, Vec<usize>>> = HashMap::new();
        for (i, view) in views.iter().enumerate() {
            for (key, value) in view.node().labels() {
                by_label
                    .entry(key)
                    .or_default()
                    .entry(value)
                    .or_default()
                    .push(i);
            }
        }
        Self { by_label }
    }

    /// The offers whose node has the selector's rarest entry (empty if some
    /// entry is on no node): the only ones the pod can fit.
    pub(super) fn narrowest(&self, selector: &[(String, String)]) -> &[usize] {
        selector
            .iter()
            .map(|(k, v)| {
                self.by_label
                    .get(k.as_str())
                    .and_then(|values| values.get(v.as_str()))
                    .map_or(&[][..], Vec::as_slice)
            })
            .min_by_key(|offers| offers.len())
            .unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use mesos::proto::{AgentId, Attribute, FrameworkId, Offer, OfferId, value};

    fn offer(host: &str, zone: &str, rack: &str) -> OfferView {
        let attr = |name: &str, text: &str| Attribute {
            name: name.into(),
            r#type: value::Type::Text as i32,
            text: Some(value::Text { value: text.into() }),
            ..Default::default()
        };
        let o = Offer {
            id: Some(OfferId::new(format!("o-{host}"))),
            framework_id: Some(FrameworkId::new("fw")),
            agent_id: Some(AgentId::new(format!("a-{host}"))),
            hostname: host.into(),
            resources: vec![mesos::resources::scalar("cpus", 1.0, None)],
            attributes: vec![attr("zone", zone), attr("rack", rack)],
            ..Default::default()
        };
        OfferView::new(&o).unwrap()
    }

    #[test]
    fn the_rarest_entry_of_a_selector_names_the_offers_to_try() {
        let views = [
            offer("h0", "z1", "r1"),
            offer("h1", "z1", "r2"),
            offer("h2", "z2", "r2"),
            offer("h3", "z1", "r2"),
        ];
        let index = SelectorIndex::new(&views);
        let sel = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(index.narrowest(&sel(&[("zone", "z1")])), [0, 1, 3]);
        // rack=r1 is rarer than zone=z1.
        assert_eq!(
            index.narrowest(&sel(&[("zone", "z1"), ("rack", "r1")])),
            [0]
        );
        assert!(index.narrowest(&sel(&[("zone", "z9")])).is_empty());
        assert!(
            index
                .narrowest(&sel(&[("zone", "z1"), ("rack", "r9")]))
                .is_empty()
        );
    }
}
