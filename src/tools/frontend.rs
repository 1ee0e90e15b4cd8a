//! Frontend tools: tools an AG-UI app declares for a turn (`RunAgentInput.tools`) and runs
//! itself. The bridge calls them like any custom tool (`CallCustomTool`); callbackd has no
//! code for them, so the call is held here until the app sends its result (the next
//! input's `tool` message) or the wait times out, like an approval that nobody decided.
//! Kept in memory: a held call lives as long as the bridge's request that waits on it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::{oneshot, watch};

use super::ToolError;
use crate::store::Namespace;

/// A frontend tool call waiting for the app's result.
#[derive(Debug, Clone)]
pub struct PendingCall {
    pub tool_call_id: String,
    pub agent_id: String,
    /// The agent's run the call belongs to, when the store said.
    pub run_id: Option<String>,
    pub tool: String,
    pub args: Value,
}

/// Why a result was not taken.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// No frontend call of the agent with that id waits (never made, answered, timed out).
    #[error("no frontend tool call {0:?} of this thread waits for a result")]
    NotPending(String),
}

struct Waiting {
    call: PendingCall,
    tx: oneshot::Sender<String>,
}

#[derive(Default)]
struct State {
    /// The frontend tools declared to each agent (name -> its `customTools` declaration),
    /// by `(namespace, agent id)`.
    declared: HashMap<(Namespace, String), Map<String, Value>>,
    /// Held calls by `(namespace, tool call id)`.
    waiting: HashMap<(Namespace, String), Waiting>,
}

/// The frontend tools declared to agents and their held calls.
pub struct FrontendCalls {
    state: Mutex<State>,
    /// Bumped whenever a call starts or stops waiting, so an AG-UI stream wakes up.
    changes: watch::Sender<u64>,
}

impl Default for FrontendCalls {
    fn default() -> Self {
        FrontendCalls {
            state: Mutex::default(),
            changes: watch::channel(0).0,
        }
    }
}

impl FrontendCalls {
    /// The agent's frontend tools from now on (replacing the previous turn's); the ones
    /// they replace.
    pub fn declare(
        &self,
        ns: &Namespace,
        agent: &str,
        tools: Map<String, Value>,
    ) -> Map<String, Value> {
        let key = (ns.clone(), agent.to_string());
        let mut s = self.lock();
        let before = if tools.is_empty() {
            s.declared.remove(&key)
        } else {
            s.declared.insert(key, tools)
        };
        before.unwrap_or_default()
    }

    /// The frontend tools declared to the agent, as `customTools` declarations (added to
    /// the registry's whenever the agent is declared to the bridge again).
    pub fn declared(&self, ns: &Namespace, agent: &str) -> Map<String, Value> {
        self.lock()
            .declared
            .get(&(ns.clone(), agent.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    pub fn is_frontend(&self, ns: &Namespace, agent: &str, tool: &str) -> bool {
        self.lock()
            .declared
            .get(&(ns.clone(), agent.to_string()))
            .is_some_and(|t| t.contains_key(tool))
    }

    /// Holds the call until the app's result (its text), or an error for the model once
    /// `timeout` passed. Dropped (the bridge hung up), the call stops waiting.
    pub async fn hold(
        &self,
        ns: &Namespace,
        call: PendingCall,
        timeout: Duration,
    ) -> Result<String, ToolError> {
        let (tx, rx) = oneshot::channel();
        let key = (ns.clone(), call.tool_call_id.clone());
        let tool = call.tool.clone();
        self.lock()
            .waiting
            .insert(key.clone(), Waiting { call, tx });
        self.changes.send_modify(|n| *n += 1);
        let _gone = Unwait { calls: self, key };
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(text)) => Ok(text),
            Ok(Err(_)) => Err(ToolError::failed(format!(
                "the app's frontend tool {tool} was withdrawn before it answered"
            ))),
            Err(_) => Err(ToolError::failed(format!(
                "the app did not return a result of its frontend tool {tool} within {} s, so \
                 the call failed",
                timeout.as_secs()
            ))),
        }
    }

    /// The agent's calls waiting for the app, by tool call id.
    pub fn pending_of(&self, ns: &Namespace, agent: &str) -> Vec<PendingCall> {
        let mut out: Vec<PendingCall> = self
            .lock()
            .waiting
            .iter()
            .filter(|((n, _), w)| n == ns && w.call.agent_id == agent)
            .map(|(_, w)| w.call.clone())
            .collect();
        out.sort_by(|a, b| a.tool_call_id.cmp(&b.tool_call_id));
        out
    }

    /// Whether `tool_call_id` of `agent` waits.
    pub fn waits(&self, ns: &Namespace, agent: &str, tool_call_id: &str) -> Option<PendingCall> {
        self.lock()
            .waiting
            .get(&(ns.clone(), tool_call_id.to_string()))
            .filter(|w| w.call.agent_id == agent)
            .map(|w| w.call.clone())
    }

    /// Returns `content` to the held call `tool_call_id` of `agent`.
    pub fn answer(
        &self,
        ns: &Namespace,
        agent: &str,
        tool_call_id: &str,
        content: String,
    ) -> Result<PendingCall, AnswerError> {
        let key = (ns.clone(), tool_call_id.to_string());
        let mut s = self.lock();
        match s.waiting.get(&key) {
            Some(w) if w.call.agent_id == agent => {}
            _ => return Err(AnswerError::NotPending(tool_call_id.to_string())),
        }
        let w = s.waiting.remove(&key).expect("checked above");
        drop(s);
        // The holder may just have timed out: then it already answered the model.
        let _ = w.tx.send(content);
        self.changes.send_modify(|n| *n += 1);
        Ok(w.call)
    }

    /// Wakes up on every change of the held calls.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes a held call that stops waiting (answered, timed out, or the bridge hung up).
struct Unwait<'a> {
    calls: &'a FrontendCalls,
    key: (Namespace, String),
}

impl Drop for Unwait<'_> {
    fn drop(&mut self) {
        if self.calls.lock().waiting.remove(&self.key).is_some() {
            self.calls.changes.send_modify(|n| *n += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> PendingCall {
        PendingCall {
            tool_call_id: id.into(),
            agent_id: "a1".into(),
            run_id: None,
            tool: "pick_color".into(),
            args: json!({}),
        }
    }

    #[tokio::test]
    async fn a_held_call_gets_the_apps_result_once_and_only_for_its_agent() {
        let calls = std::sync::Arc::new(FrontendCalls::default());
        let ns = Namespace::default();
        let mut tools = Map::new();
        tools.insert("pick_color".into(), json!({"description": "Pick"}));
        calls.declare(&ns, "a1", tools);
        assert!(calls.is_frontend(&ns, "a1", "pick_color"));
        assert!(!calls.is_frontend(&ns, "a2", "pick_color"));
        let c = calls.clone();
        let (ns2, held) = (ns.clone(), call("c1"));
        let task = tokio::spawn(async move { c.hold(&ns2, held, Duration::from_secs(30)).await });
        while calls.pending_of(&ns, "a1").is_empty() {
            tokio::task::yield_now().await;
        }
        assert!(calls.answer(&ns, "a2", "c1", "x".into()).is_err());
        calls.answer(&ns, "a1", "c1", "red".into()).unwrap();
        assert_eq!(task.await.unwrap().unwrap(), "red");
        assert!(calls.answer(&ns, "a1", "c1", "blue".into()).is_err());
        assert!(calls.pending_of(&ns, "a1").is_empty());
    }

    #[tokio::test]
    async fn an_unanswered_call_fails_after_its_timeout_and_stops_waiting() {
        let calls = FrontendCalls::default();
        let ns = Namespace::default();
        let err = calls
            .hold(&ns, call("c2"), Duration::from_millis(20))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("did not return a result"), "{err}");
        assert!(calls.pending_of(&ns, "a1").is_empty());
    }
}
