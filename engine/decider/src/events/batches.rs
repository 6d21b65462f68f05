//! A log split into its batches: each opens with a recorded input and holds the decisions
//! it caused, up to the next input. Every reader that decides a log again (the audit
//! check, the replay report, what-if) walks it with [`batches`].

use super::event::RunEvent;

/// The batches of `events`, in order: the 0-based position of each batch's first event and
/// the batch, which ends before the next recorded input (or at the end of the log). The
/// first event of the log opens the first batch whatever it is; a caller that needs an
/// input there (`Command::from_event`) checks.
#[must_use]
pub fn batches(events: &[RunEvent]) -> Batches<'_> {
    Batches { events, start: 0 }
}

/// The iterator of [`batches`].
#[derive(Debug, Clone)]
pub struct Batches<'a> {
    events: &'a [RunEvent],
    start: usize,
}

impl<'a> Iterator for Batches<'a> {
    type Item = (usize, &'a [RunEvent]);

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.start;
        let rest = self.events.get(start..)?;
        let (_, after_first) = rest.split_first()?;
        let end = after_first
            .iter()
            .position(RunEvent::is_input)
            .map_or(self.events.len(), |p| start + 1 + p);
        self.start = end;
        Some((start, self.events.get(start..end)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::RunCancelled;

    #[test]
    fn each_batch_runs_from_an_input_to_the_next() {
        let input = RunEvent::RunCancelled(RunCancelled {
            by: "a".into(),
            reason: "r".into(),
            at_ms: 1,
        });
        let decision = RunEvent::RunCompleted {
            output: serde_json::Value::Null,
            conflicts: Vec::new(),
        };
        assert!(input.is_input() && !decision.is_input());
        let log = [
            input.clone(),
            decision.clone(),
            decision.clone(),
            input.clone(),
            input.clone(),
            decision,
        ];
        let found: Vec<(usize, usize)> = batches(&log).map(|(i, b)| (i, b.len())).collect();
        assert_eq!(found, [(0, 3), (3, 1), (4, 2)]);
        assert_eq!(batches(&[]).count(), 0);
    }
}
