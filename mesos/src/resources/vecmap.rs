//! A sorted map kept in one exactly sized vector.
//!
//! A resource bag holds a handful of entries, and there is one bag per task,
//! offer and agent. A `BTreeMap` allocates a node for eleven entries even
//! for one (several kilobytes with a whole `Resource` per entry), which made
//! resource bags the largest item of the master's memory at scale. Lookups
//! here are binary searches over a few entries; inserts shift a few.

/// A map ordered by key, stored as a sorted vector sized to its contents.
#[derive(Clone, Debug)]
pub(crate) struct VecMap<K, V> {
    items: Vec<(K, V)>,
}

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        Self { items: Vec::new() }
    }
}

impl<K: Ord, V> VecMap<K, V> {
    fn find(&self, key: &K) -> Result<usize, usize> {
        self.items.binary_search_by(|(k, _)| k.cmp(key))
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.find(key).ok().map(|i| &self.items[i].1)
    }

    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.find(key).ok().map(|i| &mut self.items[i].1)
    }

    /// Inserts or replaces; the vector grows by exactly one slot.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        match self.find(&key) {
            Ok(i) => self.items[i].1 = value,
            Err(i) => {
                self.items.reserve_exact(1);
                self.items.insert(i, (key, value));
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.find(key).ok()?;
        Some(self.items.remove(i).1)
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.items.iter().map(|(k, v)| (k, v))
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.items.iter().map(|(k, _)| k)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.items.iter().map(|(_, v)| v)
    }
}

/// Like a `BTreeMap`: sorted by key, the last value of a repeated key wins.
impl<K: Ord, V> FromIterator<(K, V)> for VecMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut items: Vec<(K, V)> = iter.into_iter().collect();
        // Stable: among equal keys the later one stays later.
        items.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(K, V)> = Vec::with_capacity(items.len());
        for item in items {
            match out.last_mut() {
                Some(last) if last.0 == item.0 => *last = item,
                _ => out.push(item),
            }
        }
        out.shrink_to_fit();
        Self { items: out }
    }
}

impl<'a, K: Ord, V> IntoIterator for &'a VecMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter().map(|(k, v)| (k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::VecMap;

    #[test]
    fn behaves_like_a_sorted_map_and_sizes_itself_to_its_contents() {
        let mut m = VecMap::default();
        for (k, v) in [(3, "c"), (1, "a"), (2, "b"), (1, "A")] {
            m.insert(k, v);
        }
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [(&1, &"A"), (&2, &"b"), (&3, &"c")]
        );
        assert_eq!(m.items.capacity(), 3, "one slot per entry");
        assert_eq!(m.get(&2), Some(&"b"));
        assert_eq!(m.remove(&2), Some("b"));
        assert_eq!(m.remove(&2), None);
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), [1, 3]);
        *m.get_mut(&3).unwrap_or(&mut "x") = "C";
        assert_eq!(m.values().copied().collect::<Vec<_>>(), ["A", "C"]);

        let collected: VecMap<i32, &str> = [(2, "x"), (1, "y"), (2, "z")].into_iter().collect();
        assert_eq!(
            collected.iter().collect::<Vec<_>>(),
            [(&1, &"y"), (&2, &"z")]
        );
        assert_eq!(collected.len(), 2);
        assert!(!collected.is_empty());
    }
}
