//! A queue that costs one pointer until it is first used: the loss-recovery and reordering
//! queues of a [`super::Link`] (datagrams deemed lost, retransmissions in flight, early
//! arrivals, runs not reported yet) stay empty on a link that loses and reorders nothing,
//! which on a job's many quiet links is the rule. A `VecDeque` is four words even when empty;
//! this is one (issue 24: at most 1 KiB per peer).

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

// The box is the point: one word in the link, where the deque itself would be four.
#[allow(clippy::box_collection)]
pub struct LazyDeque<T>(Option<Box<VecDeque<T>>>);

impl<T> Default for LazyDeque<T> {
    fn default() -> Self {
        LazyDeque(None)
    }
}

impl<T> LazyDeque<T> {
    pub const fn new() -> Self {
        LazyDeque(None)
    }

    fn made(&mut self) -> &mut VecDeque<T> {
        self.0.get_or_insert_with(Default::default)
    }

    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|q| q.is_empty())
    }

    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |q| q.len())
    }

    pub fn front(&self) -> Option<&T> {
        self.0.as_ref()?.front()
    }

    pub fn front_mut(&mut self) -> Option<&mut T> {
        self.0.as_mut()?.front_mut()
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        self.0.as_ref()?.get(i)
    }

    /// Elements it has room for without growing (0: not made).
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.0.as_ref().map_or(0, |q| q.capacity())
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter().flat_map(|q| q.iter())
    }

    pub fn pop_front(&mut self) -> Option<T> {
        self.0.as_mut()?.pop_front()
    }

    pub fn pop_back(&mut self) -> Option<T> {
        self.0.as_mut()?.pop_back()
    }

    pub fn push_back(&mut self, x: T) {
        self.made().push_back(x)
    }

    pub fn push_front(&mut self, x: T) {
        self.made().push_front(x)
    }

    pub fn resize_with(&mut self, n: usize, f: impl FnMut() -> T) {
        self.made().resize_with(n, f)
    }

    /// Everything, in order, leaving the queue unmade.
    pub fn take_all(&mut self) -> impl Iterator<Item = T> {
        self.0.take().into_iter().flat_map(|q| q.into_iter())
    }

    /// Empty it and give its memory back.
    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// Give the memory back if it is empty (a queue that grew once would otherwise keep it).
    pub fn release(&mut self) {
        if self.is_empty() {
            self.0 = None;
        }
    }
}

impl<T> Extend<T> for LazyDeque<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, it: I) {
        let mut it = it.into_iter().peekable();
        if it.peek().is_some() {
            self.made().extend(it);
        }
    }
}

impl<T> Index<usize> for LazyDeque<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.0.as_ref().expect("index into an empty queue")[i]
    }
}

impl<T> IndexMut<usize> for LazyDeque<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.0.as_mut().expect("index into an empty queue")[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_deque_and_costs_a_pointer_until_used() {
        assert_eq!(
            std::mem::size_of::<LazyDeque<u64>>(),
            std::mem::size_of::<usize>()
        );
        let mut q = LazyDeque::new();
        assert!(q.is_empty() && q.front().is_none() && q.pop_front().is_none());
        q.extend(std::iter::empty());
        assert!(q.0.is_none(), "extending by nothing makes nothing");
        q.push_back(2);
        q.push_front(1);
        q.extend([3, 4]);
        assert_eq!(q.iter().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!((q.len(), q[1], q.get(3), q.get(4)), (4, 2, Some(&4), None));
        q[1] = 20;
        assert_eq!(q.pop_back(), Some(4));
        assert_eq!(q.pop_front(), Some(1));
        q.release();
        assert!(q.0.is_some(), "not empty: kept");
        assert_eq!(q.take_all().collect::<Vec<_>>(), [20, 3]);
        assert!(q.0.is_none());
        q.resize_with(3, || 7);
        *q.front_mut().unwrap() = 0;
        assert_eq!(q.iter().copied().collect::<Vec<_>>(), [0, 7, 7]);
        q.clear();
        assert!(q.0.is_none() && q.is_empty());
    }
}
