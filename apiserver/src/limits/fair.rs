//! The seats of one priority level, shared fairly between flows, in the
//! spirit of kube-apiserver's API Priority and Fairness: a request that
//! finds every seat taken waits in its own flow's queue, and each seat that
//! frees goes to the next flow in turn (round robin over the flows that are
//! waiting), so one flow with many requests queued cannot make another
//! flow's single request wait behind them or be refused.
//!
//! # Contract
//!
//! - At most `seats` [`Seat`]s are held at once; a dropped seat goes straight
//!   to the head of the next waiting flow's queue, or back to the pool.
//! - A flow's queue holds at most `queue_length_limit` requests (APF's
//!   `queueLengthLimit`); a request that finds it full is refused at once
//!   ([`Rejected::QueueFull`]). A limit of 0 never queues (APF's `Reject`).
//! - A request waits at most the wait limit it is given
//!   ([`Rejected::TimedOut`]); one that gives up (or whose caller goes away)
//!   leaves its queue, and a seat handed to it in that instant is passed on,
//!   never lost.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

/// Why a request got no seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// Its flow's queue was full.
    QueueFull,
    /// It waited its whole wait limit.
    TimedOut,
}

/// One priority level's seats and its flows' queues.
#[derive(Debug)]
pub struct FairQueue {
    seats: usize,
    queue_length_limit: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    in_use: usize,
    /// Each waiting flow's requests, oldest first; a flow is here only while
    /// it has one.
    queues: HashMap<String, VecDeque<Waiter>>,
    /// The waiting flows in the order they are served next.
    turn: VecDeque<String>,
    next_id: u64,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    seated: oneshot::Sender<()>,
}

/// A seat held; dropping it gives it to the next waiting flow.
#[derive(Debug)]
pub struct Seat {
    level: Arc<FairQueue>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.level.release();
    }
}

/// A place in a flow's queue. Dropped before it is seated, it leaves the
/// queue; seated in that instant, it passes the seat on.
struct Ticket {
    level: Arc<FairQueue>,
    flow: String,
    id: u64,
    seated: oneshot::Receiver<()>,
    settled: bool,
}

impl Ticket {
    /// Leaves the queue: the seat, if one was handed over already.
    fn leave(&mut self) -> Option<Seat> {
        self.settled = true;
        if self.level.lock().remove(&self.flow, self.id) {
            return None;
        }
        // Not queued any more: the dispatcher took it out and sent the seat
        // under the lock, so the seat is in the channel now.
        self.seated.try_recv().ok().map(|()| Seat {
            level: self.level.clone(),
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.settled {
            drop(self.leave());
        }
    }
}

impl State {
    /// Takes waiter `id` out of `flow`'s queue; false if it is not there.
    fn remove(&mut self, flow: &str, id: u64) -> bool {
        let Some(queue) = self.queues.get_mut(flow) else {
            return false;
        };
        let Some(at) = queue.iter().position(|w| w.id == id) else {
            return false;
        };
        queue.remove(at);
        if queue.is_empty() {
            self.queues.remove(flow);
            self.turn.retain(|f| f != flow);
        }
        true
    }

    /// Hands a freed seat to the head of the next waiting flow's queue;
    /// false if nobody waits (or everybody who did has gone).
    fn hand_over(&mut self) -> bool {
        while let Some(flow) = self.turn.pop_front() {
            let Some(queue) = self.queues.get_mut(&flow) else {
                continue;
            };
            let waiter = queue.pop_front();
            if queue.is_empty() {
                self.queues.remove(&flow);
            } else {
                self.turn.push_back(flow);
            }
            if let Some(w) = waiter
                && w.seated.send(()).is_ok()
            {
                return true;
            }
        }
        false
    }
}

impl FairQueue {
    /// `seats` (at least one) shared between flows whose queues hold at
    /// most `queue_length_limit` requests each.
    pub fn new(seats: usize, queue_length_limit: usize) -> Arc<Self> {
        Arc::new(Self {
            seats: seats.max(1),
            queue_length_limit,
            state: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn release(&self) {
        let mut state = self.lock();
        if !state.hand_over() {
            state.in_use = state.in_use.saturating_sub(1);
        }
    }

    /// A seat for a request of `flow`: at once if one is free, else after
    /// waiting in the flow's queue for its turn, at most `wait_limit`.
    ///
    /// # Errors
    /// The flow's queue is full, or no seat came within `wait_limit`.
    pub async fn acquire(
        self: &Arc<Self>,
        flow: &str,
        wait_limit: Duration,
    ) -> Result<Seat, Rejected> {
        let mut ticket = {
            let mut state = self.lock();
            if state.in_use < self.seats {
                state.in_use += 1;
                return Ok(Seat {
                    level: self.clone(),
                });
            }
            let queued = state.queues.get(flow).map_or(0, VecDeque::len);
            if queued >= self.queue_length_limit {
                return Err(Rejected::QueueFull);
            }
            let id = state.next_id;
            state.next_id += 1;
            let (tx, rx) = oneshot::channel();
            if queued == 0 {
                state.turn.push_back(flow.to_owned());
            }
            state
                .queues
                .entry(flow.to_owned())
                .or_default()
                .push_back(Waiter { id, seated: tx });
            Ticket {
                level: self.clone(),
                flow: flow.to_owned(),
                id,
                seated: rx,
                settled: false,
            }
        };
        match tokio::time::timeout(wait_limit, &mut ticket.seated).await {
            Ok(Ok(())) => {
                ticket.settled = true;
                Ok(Seat {
                    level: self.clone(),
                })
            }
            // The sender is only dropped unsent when the receiver is gone,
            // which it is not; count it as a wait that came to nothing.
            Ok(Err(_)) | Err(_) => ticket.leave().ok_or(Rejected::TimedOut),
        }
    }

    /// Seats held now.
    pub fn in_use(&self) -> usize {
        self.lock().in_use
    }

    /// Requests waiting now, over all flows.
    pub fn waiting(&self) -> usize {
        self.lock().queues.values().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const LONG: Duration = Duration::from_secs(3600);

    /// Starts a request of `flow` waiting for a seat.
    fn wait(
        level: &Arc<FairQueue>,
        flow: &'static str,
        wait_limit: Duration,
    ) -> tokio::task::JoinHandle<Result<Seat, Rejected>> {
        let level = level.clone();
        tokio::spawn(async move { level.acquire(flow, wait_limit).await })
    }

    /// Lets spawned tasks run until none can make progress.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_freed_seat_goes_to_the_next_flow_in_turn_not_the_longest_queue() {
        let level = FairQueue::new(2, 50);
        let held = [
            level.acquire("alice", LONG).await.unwrap(),
            level.acquire("alice", LONG).await.unwrap(),
        ];
        let alice: Vec<_> = (0..10).map(|_| wait(&level, "alice", LONG)).collect();
        settle().await;
        let bob = wait(&level, "bob", LONG);
        settle().await;
        assert_eq!(level.waiting(), 11);
        // The first freed seat goes to alice's oldest (her turn came first);
        // the next one to bob, ahead of her other nine.
        let [first, second] = held;
        drop(first);
        settle().await;
        assert!(alice[0].is_finished());
        assert!(!bob.is_finished());
        drop(second);
        settle().await;
        assert!(bob.is_finished(), "bob's one request is served next");
        assert!(alice[1..].iter().all(|h| !h.is_finished()));
        let bob = bob.await.unwrap().unwrap();
        // With bob gone, alice's queue takes every seat that frees.
        drop(bob);
        settle().await;
        assert!(alice[1].is_finished());
        assert_eq!(level.in_use(), 2);
        assert_eq!(level.waiting(), 8);
    }

    #[tokio::test]
    async fn flows_take_turns_one_seat_each() {
        let level = FairQueue::new(1, 50);
        let seat = level.acquire("x", LONG).await.unwrap();
        let a: Vec<_> = (0..3).map(|_| wait(&level, "a", LONG)).collect();
        settle().await;
        let b: Vec<_> = (0..3).map(|_| wait(&level, "b", LONG)).collect();
        settle().await;
        let mut order = Vec::new();
        let mut seat = Some(seat);
        let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
        for _ in 0..6 {
            drop(seat.take());
            settle().await;
            let next = if a.peek().is_some_and(|h| h.is_finished()) {
                order.push('a');
                a.next().unwrap()
            } else {
                assert!(b.peek().is_some_and(|h| h.is_finished()), "one was seated");
                order.push('b');
                b.next().unwrap()
            };
            seat = Some(next.await.unwrap().unwrap());
        }
        assert_eq!(order.iter().collect::<String>(), "ababab");
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_other_flows_still_queue() {
        let level = FairQueue::new(1, 2);
        let _seat = level.acquire("alice", LONG).await.unwrap();
        let _queued = [wait(&level, "alice", LONG), wait(&level, "alice", LONG)];
        settle().await;
        assert_eq!(
            level.acquire("alice", LONG).await.unwrap_err(),
            Rejected::QueueFull
        );
        let bob = wait(&level, "bob", LONG);
        settle().await;
        assert!(!bob.is_finished(), "bob queues in his own queue");
        assert_eq!(level.waiting(), 3);

        let no_queue = FairQueue::new(1, 0);
        let _seat = no_queue.acquire("a", LONG).await.unwrap();
        assert_eq!(
            no_queue.acquire("b", LONG).await.unwrap_err(),
            Rejected::QueueFull
        );
    }

    #[tokio::test]
    async fn a_wait_past_its_limit_is_refused_and_leaves_its_queue() {
        let level = FairQueue::new(1, 50);
        let seat = level.acquire("alice", LONG).await.unwrap();
        let started = tokio::time::Instant::now();
        let refused = level.acquire("bob", Duration::from_millis(50)).await;
        assert_eq!(refused.unwrap_err(), Rejected::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(level.waiting(), 0);
        drop(seat);
        assert_eq!(level.in_use(), 0, "nobody waits: the seat is free");
    }

    #[tokio::test]
    async fn a_waiter_that_goes_away_passes_its_seat_on() {
        let level = FairQueue::new(1, 50);
        let seat = level.acquire("alice", LONG).await.unwrap();
        let gone = wait(&level, "bob", LONG);
        settle().await;
        let carol = wait(&level, "carol", LONG);
        settle().await;
        gone.abort();
        let _ = gone.await;
        assert_eq!(level.waiting(), 1, "bob's place is gone");
        drop(seat);
        settle().await;
        assert!(carol.is_finished());
        drop(carol.await.unwrap().unwrap());
        assert_eq!(level.in_use(), 0);

        // Seated and dropped in the same instant: the seat is not lost.
        let seat = level.acquire("alice", LONG).await.unwrap();
        let level2 = level.clone();
        let mut ticket_holder = Box::pin(async move { level2.acquire("bob", LONG).await });
        assert!(futures::poll!(ticket_holder.as_mut()).is_pending());
        drop(seat); // hands the seat to bob's ticket...
        drop(ticket_holder); // ...which goes away before it looks
        assert_eq!(level.in_use(), 0);
        assert!(level.acquire("dave", Duration::ZERO).await.is_ok());
    }
}
