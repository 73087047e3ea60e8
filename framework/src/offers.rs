//! The offer store: every live offer, with its time to live.
//!
//! # Contract
//!
//! - An offer lives until it is used (`take`), rescinded, dropped on
//!   re-subscribe (`clear`), or its TTL runs out (`expire`). Expired offers
//!   are handed back so the caller declines them with a refuse filter: an
//!   offer we hold but cannot use keeps resources from other frameworks.
//! - The store reads no clock: callers pass `now`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use mesos::proto::{Offer, OfferId};
use procurement::OfferView;

/// How long an unused offer is kept before it is declined. Long enough for a
/// burst of pods to arrive and be placed together, short enough that a
/// framework with nothing to run does not sit on the cluster's resources.
pub const DEFAULT_OFFER_TTL: Duration = Duration::from_secs(5);

/// An offer we hold.
#[derive(Debug, Clone)]
pub struct LiveOffer {
    /// The offer as Mesos sent it.
    pub offer: Arc<Offer>,
    /// When it arrived.
    pub received: SystemTime,
    /// When it will be declined if still unused.
    pub expires: SystemTime,
    /// The offer as procurement reads it, parsed once on arrival.
    pub view: Option<OfferView>,
}

impl LiveOffer {
    /// The offer's id (empty if Mesos sent none, which validation rejects earlier).
    pub fn id(&self) -> &str {
        self.offer.id.as_ref().map_or("", |id| id.value.as_str())
    }

    /// The agent the offer is on.
    pub fn agent_id(&self) -> &str {
        self.offer
            .agent_id
            .as_ref()
            .map_or("", |id| id.value.as_str())
    }
}

/// Why an offer was not added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    /// The offer has no id or no agent id.
    #[error("offer without an id or agent id")]
    Incomplete,
    /// Procurement cannot read the offer (e.g. a malformed taint attribute).
    #[error("offer cannot be used: {0}")]
    Unusable(String),
}

/// Live offers by id.
#[derive(Debug)]
pub struct OfferStore {
    ttl: Duration,
    offers: HashMap<String, LiveOffer>,
}

impl OfferStore {
    /// An empty store whose offers live for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            offers: HashMap::new(),
        }
    }

    /// The configured time to live.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Keeps an offer until `now + ttl`. A repeated offer id replaces the old one.
    pub fn add(&mut self, offer: Offer, now: SystemTime) -> Result<(), OfferError> {
        let id = match (&offer.id, &offer.agent_id) {
            (Some(id), Some(_)) if !id.value.is_empty() => id.value.clone(),
            _ => return Err(OfferError::Incomplete),
        };
        let view = OfferView::new(&offer).map_err(|e| OfferError::Unusable(e.to_string()))?;
        self.offers.insert(
            id,
            LiveOffer {
                offer: Arc::new(offer),
                received: now,
                expires: now + self.ttl,
                view: Some(view),
            },
        );
        Ok(())
    }

    /// Forgets a rescinded offer; true if it was held.
    pub fn rescind(&mut self, id: &OfferId) -> bool {
        self.offers.remove(&id.value).is_some()
    }

    /// Removes an offer to use it.
    pub fn take(&mut self, id: &str) -> Option<LiveOffer> {
        self.offers.remove(id)
    }

    /// Removes and returns every offer whose TTL has run out.
    pub fn expire(&mut self, now: SystemTime) -> Vec<LiveOffer> {
        let expired: Vec<String> = self
            .offers
            .iter()
            .filter(|(_, o)| o.expires <= now)
            .map(|(id, _)| id.clone())
            .collect();
        expired
            .into_iter()
            .filter_map(|id| self.offers.remove(&id))
            .collect()
    }

    /// Drops everything (on re-subscribe the master rescinds all offers).
    pub fn clear(&mut self) -> usize {
        let n = self.offers.len();
        self.offers.clear();
        n
    }

    /// The live offers, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &LiveOffer> {
        self.offers.values()
    }

    /// The live offers, to complete their views (in no particular order).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut LiveOffer> {
        self.offers.values_mut()
    }

    /// The number of live offers.
    pub fn len(&self) -> usize {
        self.offers.len()
    }

    /// Whether no offer is held.
    pub fn is_empty(&self) -> bool {
        self.offers.is_empty()
    }

    /// The earliest expiry, to know when to wake up.
    pub fn next_expiry(&self) -> Option<SystemTime> {
        self.offers.values().map(|o| o.expires).min()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use mesos::proto::AgentId;

    fn offer(id: &str) -> Offer {
        Offer {
            id: Some(OfferId::new(id)),
            agent_id: Some(AgentId::new("a1")),
            hostname: "h".into(),
            ..Default::default()
        }
    }

    #[test]
    fn offers_expire_after_their_ttl_and_are_handed_back_once() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let mut store = OfferStore::new(Duration::from_secs(5));
        store.add(offer("o1"), t0).unwrap();
        store.add(offer("o2"), t0 + Duration::from_secs(3)).unwrap();
        assert!(store.expire(t0 + Duration::from_secs(4)).is_empty());
        let gone = store.expire(t0 + Duration::from_secs(5));
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].id(), "o1");
        assert!(store.expire(t0 + Duration::from_secs(5)).is_empty());
        assert_eq!(store.len(), 1);
        assert_eq!(store.next_expiry(), Some(t0 + Duration::from_secs(8)));
    }

    #[test]
    fn rescinded_and_taken_offers_leave_the_store() {
        let now = SystemTime::UNIX_EPOCH;
        let mut store = OfferStore::new(DEFAULT_OFFER_TTL);
        store.add(offer("o1"), now).unwrap();
        store.add(offer("o2"), now).unwrap();
        assert!(store.rescind(&OfferId::new("o1")));
        assert!(!store.rescind(&OfferId::new("o1")));
        assert_eq!(store.take("o2").unwrap().id(), "o2");
        assert!(store.take("o2").is_none());
        assert!(store.is_empty());
    }

    #[test]
    fn incomplete_offers_are_refused_and_clear_drops_all() {
        let now = SystemTime::UNIX_EPOCH;
        let mut store = OfferStore::new(DEFAULT_OFFER_TTL);
        assert_eq!(
            store.add(Offer::default(), now),
            Err(OfferError::Incomplete)
        );
        store.add(offer("o1"), now).unwrap();
        assert_eq!(store.clear(), 1);
        assert!(store.is_empty());
    }
}
