//! Charging a namespace's quotas: [`charge`] for one create (the dry run's check),
//! and the [`Ledger`] a batch of creates is charged against, with each quota's
//! amounts parsed once and turned back into quantities once.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use quantity::{Amount, Format};

use super::{
    Subject, Usage, constraints, hard_and_used, pod_in_scope, selectors, to_quantities, tracked,
    usage,
};

/// What charging `subject` to `quotas` makes of them: for each quota that covers it,
/// its name and its new `used`; or, if one refuses, kube-apiserver's message.
pub fn charge(
    quotas: &[ResourceQuota],
    subject: Subject<'_>,
    now: SystemTime,
) -> Result<Vec<(String, Usage)>, String> {
    let mut ledger = Ledger::new(quotas);
    let charged = ledger.charge(subject, now)?;
    Ok(charged
        .into_iter()
        .filter_map(|i| {
            let e = &ledger.entries[i];
            Some((e.name.clone(), e.used.clone()?))
        })
        .collect())
}

/// A namespace's quotas with their amounts parsed once, for a batch of charges: each
/// charge reads and adds exact amounts, and only the batch's end turns them back into
/// quantities ([`Ledger::used_of`]).
#[derive(Debug)]
pub struct Ledger {
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    name: String,
    hard: Usage,
    used: Option<Usage>,
    /// Its scopes, as [`selectors`] reads them.
    scopes: Vec<(String, String, Vec<String>)>,
    charged: bool,
}

impl Entry {
    /// [`covers`], on what the ledger parsed.
    fn covers(&self, subject: Subject<'_>) -> bool {
        if tracked(&self.hard, subject).is_empty() {
            return false;
        }
        match subject {
            Subject::Pod(pod) => self.scopes.iter().all(|s| pod_in_scope(pod, s)),
            Subject::Object(_) => self.scopes.is_empty(),
        }
    }
}

impl Ledger {
    /// The ledger of `quotas`, in their order.
    pub fn new(quotas: &[ResourceQuota]) -> Self {
        let entries = quotas
            .iter()
            .map(|q| {
                let (hard, used) = hard_and_used(q);
                Entry {
                    name: q.metadata.name.clone().unwrap_or_default(),
                    hard,
                    used,
                    scopes: selectors(q),
                    charged: false,
                }
            })
            .collect();
        Ledger { entries }
    }

    /// Charges `subject` to every quota that covers it, all or none: the indices of
    /// the quotas charged, or kube-apiserver's refusal (and nothing charged).
    ///
    /// # Errors
    /// The refusal's message.
    pub fn charge(&mut self, subject: Subject<'_>, now: SystemTime) -> Result<Vec<usize>, String> {
        let delta = usage(subject, now);
        let mut covering = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            if !e.covers(subject) {
                continue;
            }
            let tracked = tracked(&e.hard, subject);
            constraints(&tracked, subject)
                .map_err(|why| format!("failed quota: {}: {why}", e.name))?;
            let used = e.used.as_ref();
            if tracked
                .iter()
                .any(|t| !used.is_some_and(|u| u.contains_key(t)))
            {
                let mut names = tracked.clone();
                names.sort();
                return Err(format!(
                    "status unknown for quota: {}, resources: {}",
                    e.name,
                    names.join(",")
                ));
            }
            covering.push(i);
        }
        let mut sums = Vec::with_capacity(covering.len());
        for &i in &covering {
            let e = &self.entries[i];
            let used = e.used.clone().unwrap_or_default();
            let requested: Usage = delta
                .iter()
                .filter(|(k, _)| e.hard.contains_key(*k))
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            let mut new_used = used.clone();
            for (k, v) in &requested {
                let sum = new_used.entry(k.clone()).or_insert(Amount::ZERO);
                *sum = sum
                    .checked_add(*v)
                    .unwrap_or(Amount::from_units(i64::MAX, Format::DecimalSi));
            }
            let exceeded: Vec<&String> = requested
                .keys()
                .filter(|k| new_used.get(*k) > e.hard.get(*k))
                .collect();
            if !exceeded.is_empty() {
                let show = |u: &Usage| {
                    let parts: Vec<String> = exceeded
                        .iter()
                        .filter_map(|k| u.get(*k).map(|v| format!("{k}={v}")))
                        .collect();
                    parts.join(",")
                };
                return Err(format!(
                    "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                    e.name,
                    show(&requested),
                    show(&used),
                    show(&e.hard)
                ));
            }
            sums.push(new_used);
        }
        for (&i, used) in covering.iter().zip(sums) {
            let e = &mut self.entries[i];
            e.used = Some(used);
            e.charged = true;
        }
        Ok(covering)
    }

    /// The `used` of the quota at `index` as quantities, if a charge changed it.
    pub fn used_of(&self, index: usize) -> Option<BTreeMap<String, Quantity>> {
        let e = self.entries.get(index)?;
        let used = e.used.as_ref().filter(|_| e.charged)?;
        Some(to_quantities(used))
    }
}
