//! The jobs the broker still needs, by their number in submission order.
//! A job leaves once nothing can refer to it any more (see
//! `Broker::retire_jobs`): memory holds what is alive, pending or in the
//! API, not every job ever submitted; numbers are never reused.

use std::collections::BTreeMap;
use std::ops::{Index, IndexMut};

pub(super) struct Jobs<T> {
    /// In number order (what the lifecycle's passes rely on).
    live: BTreeMap<usize, T>,
    /// Jobs ever pushed: the next number.
    count: usize,
}

impl<T> Jobs<T> {
    pub fn new() -> Self {
        Jobs {
            live: BTreeMap::new(),
            count: 0,
        }
    }

    /// Jobs ever submitted (the next job's number).
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn push(&mut self, job: T) -> usize {
        let i = self.count;
        self.live.insert(i, job);
        self.count += 1;
        i
    }

    pub fn contains(&self, i: usize) -> bool {
        self.live.contains_key(&i)
    }

    pub fn remove(&mut self, i: usize) -> Option<T> {
        self.live.remove(&i)
    }

    /// The jobs still here, by number.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.live.iter().map(|(&i, j)| (i, j))
    }

    /// The numbers of the jobs still here, in order.
    pub fn keys(&self) -> impl Iterator<Item = usize> + '_ {
        self.live.keys().copied()
    }

    /// Jobs still here.
    pub fn live(&self) -> usize {
        self.live.len()
    }
}

impl<T> Index<usize> for Jobs<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.live[&i]
    }
}

impl<T> IndexMut<usize> for Jobs<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        self.live.get_mut(&i).expect("a job still here")
    }
}
