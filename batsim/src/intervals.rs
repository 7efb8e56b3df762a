//! Batsim allocation strings as interval sets.
//!
//! Batsim writes a set of resource ids as space-separated closed intervals:
//! `"0 2-5"` is {0, 2, 3, 4, 5}. A comma-separated string is *not* accepted
//! (real Batsim misreads it and may abort), so it is refused here with a
//! message saying so rather than silently reinterpreted.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A set of non-negative resource ids, kept as sorted, disjoint, non-adjacent
/// closed intervals.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct IntervalSet {
    intervals: Vec<(u32, u32)>,
}

/// Why an allocation string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntervalSetError {
    #[error("empty allocation string")]
    Empty,
    #[error(
        "allocation {0:?} uses commas; Batsim expects space-separated intervals such as \"0 2-5\""
    )]
    Comma(String),
    #[error("invalid interval {part:?} in allocation {input:?}: {why}")]
    Invalid {
        input: String,
        part: String,
        why: &'static str,
    },
}

impl IntervalSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// The set {id}.
    pub fn single(id: u32) -> Self {
        Self {
            intervals: vec![(id, id)],
        }
    }

    /// The set {lo..=hi}.
    pub fn range(lo: u32, hi: u32) -> Self {
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        Self {
            intervals: vec![(lo, hi)],
        }
    }

    /// Builds a set from any ids, in any order, with repeats.
    pub fn from_ids<I: IntoIterator<Item = u32>>(ids: I) -> Self {
        let mut ids: Vec<u32> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        let mut set = Self::new();
        for id in ids {
            set.push_sorted(id, id);
        }
        set
    }

    /// Inserts an interval, keeping the representation canonical.
    pub fn insert(&mut self, lo: u32, hi: u32) {
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        self.intervals.push((lo, hi));
        self.normalize();
    }

    fn push_sorted(&mut self, lo: u32, hi: u32) {
        if let Some(last) = self.intervals.last_mut() {
            if lo <= last.1.saturating_add(1) {
                last.1 = last.1.max(hi);
                return;
            }
        }
        self.intervals.push((lo, hi));
    }

    fn normalize(&mut self) {
        let mut v = std::mem::take(&mut self.intervals);
        v.sort_unstable();
        for (lo, hi) in v {
            self.push_sorted(lo, hi);
        }
    }

    /// Number of ids in the set.
    pub fn len(&self) -> u64 {
        self.intervals
            .iter()
            .map(|&(lo, hi)| u64::from(hi - lo) + 1)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    pub fn contains(&self, id: u32) -> bool {
        self.intervals.iter().any(|&(lo, hi)| lo <= id && id <= hi)
    }

    /// The smallest id, if any.
    pub fn first(&self) -> Option<u32> {
        self.intervals.first().map(|&(lo, _)| lo)
    }

    /// The largest id, if any.
    pub fn last(&self) -> Option<u32> {
        self.intervals.last().map(|&(_, hi)| hi)
    }

    /// Every id in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.intervals.iter().flat_map(|&(lo, hi)| lo..=hi)
    }

    /// The intervals themselves.
    pub fn intervals(&self) -> &[(u32, u32)] {
        &self.intervals
    }

    /// Parses Batsim's text form.
    pub fn parse(input: &str) -> Result<Self, IntervalSetError> {
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Err(IntervalSetError::Empty);
        }
        if trimmed.contains(',') {
            return Err(IntervalSetError::Comma(input.to_string()));
        }
        let invalid = |part: &str, why| IntervalSetError::Invalid {
            input: input.to_string(),
            part: part.to_string(),
            why,
        };
        let mut set = Self::new();
        for part in trimmed.split_whitespace() {
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (lo, hi),
                None => (part, part),
            };
            let lo: u32 = lo
                .parse()
                .map_err(|_| invalid(part, "not a non-negative integer"))?;
            let hi: u32 = hi
                .parse()
                .map_err(|_| invalid(part, "not a non-negative integer"))?;
            if lo > hi {
                return Err(invalid(part, "lower bound above upper bound"));
            }
            set.intervals.push((lo, hi));
        }
        set.normalize();
        Ok(set)
    }
}

impl fmt::Display for IntervalSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(lo, hi)) in self.intervals.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for IntervalSet {
    type Err = IntervalSetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for IntervalSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IntervalSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_prints_batsim_forms() {
        let s = IntervalSet::parse("0 2-5").unwrap();
        assert_eq!(s.len(), 5);
        assert_eq!(s.to_string(), "0 2-5");
        assert_eq!(IntervalSet::parse("1-2").unwrap().to_string(), "1-2");
        assert_eq!(IntervalSet::parse("3 0 1 2").unwrap().to_string(), "0-3");
        assert_eq!(IntervalSet::parse(" 7 ").unwrap().to_string(), "7");
    }

    #[test]
    fn refuses_commas_and_garbage() {
        assert!(matches!(
            IntervalSet::parse("0,1"),
            Err(IntervalSetError::Comma(_))
        ));
        assert!(IntervalSet::parse("").is_err());
        assert!(IntervalSet::parse("a-b").is_err());
        assert!(IntervalSet::parse("5-2").is_err());
        assert!(IntervalSet::parse("-1").is_err());
        assert!(IntervalSet::parse("99999999999").is_err());
    }

    proptest! {
        #[test]
        fn round_trips(ids in proptest::collection::vec(0u32..200, 1..40)) {
            let set = IntervalSet::from_ids(ids.iter().copied());
            let again = IntervalSet::parse(&set.to_string()).unwrap();
            prop_assert_eq!(&set, &again);
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), sorted);
        }

        #[test]
        fn never_panics(s in ".{0,40}") {
            let _ = IntervalSet::parse(&s);
        }
    }
}
