//! The actions the race decided and its caller has not polled yet, kept as ids: a
//! start's candidate is in the report already, and is copied out only when the start is
//! polled.

use std::collections::VecDeque;

use super::AttemptId;

/// An action as the race keeps it until it is polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pending {
    Start(AttemptId),
    Cancel(AttemptId),
    Won(AttemptId),
    /// The race failed; the error waits beside the queue.
    Failed,
}

/// How many actions wait in place before the queue takes a list: a race's usual output
/// (a start, then the win; or the cancels and the failure of a timeout) fits.
const IN_PLACE: usize = 4;

/// The pending actions, oldest first: the first few in place (most races allocate
/// nothing for their actions), the rest in a list. Every action in place is older than
/// every action in the list, so taking from the place first keeps the order.
#[derive(Debug)]
pub(super) struct Outbox {
    in_place: [Pending; IN_PLACE],
    /// Where the oldest action in place is, and how many there are.
    head: u8,
    len: u8,
    more: VecDeque<Pending>,
}

impl Outbox {
    pub(super) fn new() -> Outbox {
        Outbox {
            in_place: [Pending::Failed; IN_PLACE],
            head: 0,
            len: 0,
            more: VecDeque::new(),
        }
    }

    /// Queues `action` after every other. Cost: constant (amortised).
    pub(super) fn push(&mut self, action: Pending) {
        let len = usize::from(self.len);
        if self.more.is_empty() && len < IN_PLACE {
            self.in_place[(usize::from(self.head) + len) % IN_PLACE] = action;
            self.len += 1;
        } else {
            self.more.push_back(action);
        }
    }

    /// The oldest action. Cost: constant.
    pub(super) fn pop(&mut self) -> Option<Pending> {
        if self.len == 0 {
            return self.more.pop_front();
        }
        let action = self.in_place[usize::from(self.head)];
        self.head = ((usize::from(self.head) + 1) % IN_PLACE) as u8;
        self.len -= 1;
        Some(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes and pops interleaved in every way up to a few dozen actions come out in the
    /// order they went in, whether they waited in place or in the list.
    #[test]
    fn first_in_first_out_across_the_place_and_the_list() {
        for pattern in 0u32..1 << 12 {
            let mut outbox = Outbox::new();
            let mut model = VecDeque::new();
            let mut next = 0;
            for bit in 0..24 {
                // Two pushes per pop on average while the pattern's bits say so.
                if pattern >> (bit % 12) & 1 == 1 || bit % 3 == 0 {
                    outbox.push(Pending::Start(AttemptId(next)));
                    model.push_back(Pending::Start(AttemptId(next)));
                    next += 1;
                } else {
                    assert_eq!(outbox.pop(), model.pop_front());
                }
            }
            while let Some(a) = model.pop_front() {
                assert_eq!(outbox.pop(), Some(a));
            }
            assert_eq!(outbox.pop(), None);
        }
    }
}
