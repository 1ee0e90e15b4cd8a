//! [`RunStatus`]: a run's status, in the run document's spelling (`finished`) and in its
//! stored `status` event's (`FINISHED`).

use serde_json::Value;

/// A run's status (callback contract, RunDoc `status`). Its schema is the run API's
/// `RunStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    Finished,
    Error,
    Cancelled,
    Expired,
}

impl RunStatus {
    /// Every status, in the order a run goes through them.
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Finished,
        RunStatus::Error,
        RunStatus::Cancelled,
        RunStatus::Expired,
    ];

    /// [`ALL`](Self::ALL) as the run document spells them (the run API's `?status=` and
    /// the import check them against this list).
    pub const NAMES: [&'static str; 6] = [
        "queued",
        "running",
        "finished",
        "error",
        "cancelled",
        "expired",
    ];

    /// The run document's spelling (`"finished"`), also the run API's.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The spelling of the bridge's stored `status` event (`"FINISHED"`).
    pub fn event_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "QUEUED",
            RunStatus::Running => "RUNNING",
            RunStatus::Finished => "FINISHED",
            RunStatus::Error => "ERROR",
            RunStatus::Cancelled => "CANCELLED",
            RunStatus::Expired => "EXPIRED",
        }
    }

    /// A run document's status; `None` for anything else.
    pub fn parse(s: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// A stored `status` event's status; `None` for anything else.
    pub fn parse_event(s: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|st| st.event_str() == s)
    }

    /// The status of run document `doc`, if it has a known one.
    pub fn of_doc(doc: &Value) -> Option<RunStatus> {
        doc.get("status")
            .and_then(Value::as_str)
            .and_then(Self::parse)
    }

    /// Whether a run in this status has ended: nothing it does changes any more, its held
    /// calls can no longer run.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Finished | RunStatus::Error | RunStatus::Cancelled | RunStatus::Expired
        )
    }

    /// The statuses of an ended run.
    pub fn terminal() -> impl Iterator<Item = RunStatus> {
        Self::ALL.into_iter().filter(|s| s.is_terminal())
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_read_back_and_only_the_four_ends_are_terminal() {
        for s in RunStatus::ALL {
            assert_eq!(RunStatus::parse(s.as_str()), Some(s));
            assert_eq!(RunStatus::parse_event(s.event_str()), Some(s));
        }
        assert_eq!(RunStatus::parse("FINISHED"), None);
        assert_eq!(RunStatus::parse_event("finished"), None);
        assert_eq!(RunStatus::ALL.map(RunStatus::as_str), RunStatus::NAMES);
        let ends: Vec<_> = RunStatus::terminal().map(RunStatus::as_str).collect();
        assert_eq!(ends, ["finished", "error", "cancelled", "expired"]);
        assert_eq!(
            RunStatus::of_doc(&serde_json::json!({"status": "running"})),
            Some(RunStatus::Running)
        );
    }
}
