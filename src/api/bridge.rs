//! The bridge the run API drives for its writes (`CreateAgent`, `ResumeAgent`, `Send`,
//! `CancelRun`), and the slot it is attached through: `callbackd run` attaches the bridge it
//! supervises once its ready line arrives; `serve` attaches the one `[bridge]` names.
//! Without one, the writes answer `501 not_implemented`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::{json, Value};

use super::config::BridgeConfig;
use super::problem::{Problem, ProblemCode};
use crate::connect::client::{ClientError, ConnectClient, MessageStream};
use crate::store::Namespace;

const SERVICE: &str = "/sdk.v1.SdkAgentService/";

/// A bridge to drive.
#[derive(Debug, Clone)]
pub struct BridgeClient {
    client: ConnectClient,
    /// The workspace new sessions use when the request names none.
    pub default_cwd: Option<String>,
    pub default_model: String,
    pub api_key: String,
}

impl BridgeClient {
    pub fn new(
        url: &str,
        token: Option<String>,
        default_cwd: Option<String>,
        default_model: String,
        api_key: String,
    ) -> Result<Self, String> {
        Ok(BridgeClient {
            client: ConnectClient::new(url, token)?,
            default_cwd,
            default_model,
            api_key,
        })
    }

    /// From a configured bridge (`[bridge]`, `[namespaces.bridge]`), whose `url` is set.
    pub fn from_config(cfg: &BridgeConfig) -> Result<Self, String> {
        let url = cfg.url.as_deref().ok_or("url is not set")?;
        let token = match (&cfg.token, &cfg.token_file) {
            (Some(t), _) => Some(t.expose().to_string()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("token_file {}: {e}", path.display()))?
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
        BridgeClient::new(
            url,
            token,
            cfg.default_cwd.clone(),
            cfg.model(),
            cfg.api_key(),
        )
    }

    /// From the bridge's ready JSON (`url`, `authTokenFile`, `workspaceRef`).
    pub fn from_ready(ready: &Value, model: String, api_key: String) -> Result<Self, String> {
        let url = ready
            .get("url")
            .and_then(Value::as_str)
            .ok_or("the bridge's ready line has no url")?;
        let token = match ready.get("authTokenFile").and_then(Value::as_str) {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read the bridge's token file {path}: {e}"))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        };
        let cwd = ready
            .get("workspaceRef")
            .and_then(Value::as_str)
            .map(str::to_string);
        BridgeClient::new(url, token, cwd, model, api_key)
    }

    pub fn url(&self) -> &str {
        self.client.url()
    }

    fn options(&self, model: &str, cwd: &str, tools: &Value) -> Value {
        json!({
            "model": {"id": model},
            "apiKey": self.api_key,
            "local": {"cwd": [cwd], "customTools": tools},
        })
    }

    /// `CreateAgent`; the new agent's id.
    pub async fn create_agent(
        &self,
        model: &str,
        cwd: &str,
        tools: &Value,
    ) -> Result<String, ClientError> {
        let out = self
            .client
            .unary(
                &format!("{SERVICE}CreateAgent"),
                &json!({"options": self.options(model, cwd, tools)}),
            )
            .await?;
        Ok(out
            .get("agentId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string())
    }

    /// `ResumeAgent`: declares the agent's tools again (after a bridge restart).
    pub async fn resume_agent(
        &self,
        agent_id: &str,
        model: &str,
        cwd: &str,
        tools: &Value,
    ) -> Result<(), ClientError> {
        self.client
            .unary(
                &format!("{SERVICE}ResumeAgent"),
                &json!({"agentId": agent_id, "options": self.options(model, cwd, tools)}),
            )
            .await
            .map(drop)
    }

    /// `Send` with deltas on: the bridge's live stream of the new run.
    pub async fn send(&self, agent_id: &str, text: &str) -> Result<MessageStream, ClientError> {
        self.client
            .stream(
                &format!("{SERVICE}Send"),
                &json!({
                    "agentId": agent_id,
                    "message": {"text": text},
                    "options": {"enableDeltas": true, "enableSteps": true},
                }),
            )
            .await
    }

    /// `SdkBridgeControlService/Ping`: the bridge accepts RPCs (`callbackd run` waits for it
    /// before it says it is ready).
    pub async fn ping(&self) -> Result<(), ClientError> {
        self.client
            .unary("/sdk.v1.SdkBridgeControlService/Ping", &json!({}))
            .await
            .map(drop)
    }

    /// `CancelRun`.
    pub async fn cancel_run(&self, run_id: &str, agent_id: &str) -> Result<(), ClientError> {
        self.client
            .unary(
                &format!("{SERVICE}CancelRun"),
                &json!({"runId": run_id, "agentId": agent_id}),
            )
            .await
            .map(drop)
    }
}

/// Where the bridge is attached, shared by the handlers and whoever attaches it.
#[derive(Clone, Default)]
pub struct BridgeSlot {
    inner: Arc<RwLock<Option<Arc<BridgeClient>>>>,
}

impl BridgeSlot {
    pub fn attach(&self, client: BridgeClient) {
        tracing::info!(url = client.url(), "run API attached to the bridge");
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(client));
    }

    pub fn detach(&self) {
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The attached bridge, or `501 not_implemented` saying how to attach one.
    pub fn get(&self) -> Result<Arc<BridgeClient>, Problem> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                Problem::new(
                    ProblemCode::NotImplemented,
                    "no bridge is attached to this daemon for this namespace: start it as \
                     `callbackd run [--namespace N] -- <bridge>`, or set [bridge] (a namespace's \
                     own: [namespaces.bridge]) url and token_file in the config of `callbackd \
                     serve`; reads and streams work without one",
                )
            })
    }
}

/// The bridge slot of every namespace. A namespace's slot is attached from its configured
/// bridge (`[bridge]`, `[namespaces.bridge]`; re-attached on reload when that changes) or by
/// `callbackd run --namespace N`, which supervises it.
#[derive(Clone, Default)]
pub struct Bridges {
    inner: Arc<RwLock<HashMap<Namespace, BridgeSlot>>>,
    /// What each configured slot was attached from, to tell a reload's changes.
    configured: Arc<std::sync::Mutex<HashMap<Namespace, BridgeConfig>>>,
}

impl Bridges {
    /// `ns`'s slot (created empty on first use).
    pub fn slot(&self, ns: &Namespace) -> BridgeSlot {
        if let Some(slot) = self.inner.read().unwrap_or_else(|p| p.into_inner()).get(ns) {
            return slot.clone();
        }
        self.inner
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(ns.clone())
            .or_default()
            .clone()
    }

    /// Attaches each namespace's configured bridge of `table` whose configuration is new or
    /// changed, and detaches those whose configuration is gone. A slot attached by
    /// `callbackd run` is left alone unless its namespace configures a bridge of its own.
    pub fn configure(&self, table: &crate::namespaces::Table) -> Result<(), String> {
        let mut configured = self.configured.lock().unwrap_or_else(|p| p.into_inner());
        let mut clients = Vec::new();
        for (ns, settings) in &table.settings {
            let Some(cfg) = &settings.bridge else {
                continue;
            };
            if configured.get(ns) == Some(cfg) {
                continue;
            }
            let client = BridgeClient::from_config(cfg)
                .map_err(|e| format!("namespaces[{}].bridge: {e}", ns.as_str()))?;
            clients.push((ns.clone(), cfg.clone(), client));
        }
        let gone: Vec<Namespace> = configured
            .keys()
            .filter(|ns| table.settings.get(*ns).is_none_or(|s| s.bridge.is_none()))
            .cloned()
            .collect();
        for ns in gone {
            configured.remove(&ns);
            self.slot(&ns).detach();
        }
        for (ns, cfg, client) in clients {
            self.slot(&ns).attach(client);
            configured.insert(ns, cfg);
        }
        Ok(())
    }
}

/// The problem for a failed bridge call: `503 unavailable` when it could not be reached,
/// else the bridge's own message under the closest code.
pub fn bridge_problem(what: &str, e: &ClientError) -> Problem {
    let code = match e {
        ClientError::Transport { .. } => ProblemCode::Unavailable,
        ClientError::Protocol { .. } => ProblemCode::Unavailable,
        ClientError::Status { code, .. } => match code.as_str() {
            "not_found" => ProblemCode::NotFound,
            "invalid_argument" => ProblemCode::InvalidArgument,
            "failed_precondition" | "already_exists" | "aborted" => ProblemCode::FailedPrecondition,
            "permission_denied" => ProblemCode::PermissionDenied,
            "unavailable" => ProblemCode::Unavailable,
            "unimplemented" => ProblemCode::NotImplemented,
            // A namespace's quota (the store refused the bridge's write), or the bridge's own
            // rate limits: the caller may retry later, it is not our failure.
            "resource_exhausted" => ProblemCode::ResourceExhausted,
            _ => ProblemCode::Internal,
        },
    };
    let detail = match e {
        ClientError::Transport { .. } | ClientError::Protocol { .. } => format!(
            "{what}: the bridge is not reachable ({e}); stored sessions, runs and streams still work"
        ),
        // The bridge repeats the code at the start of its message: say it once.
        ClientError::Status { code, message } => {
            let message = message
                .strip_prefix(&format!("[{code}] "))
                .unwrap_or(message);
            format!("{what}: the bridge answered: [{code}] {message}")
        }
    };
    Problem::new(code, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namespaces::{Settings, Table};

    fn table(bridges: &[(&str, Option<&str>)]) -> Table {
        let mut t = Table::default();
        for (ns, url) in bridges {
            t.settings.insert(
                Namespace::new(ns),
                Arc::new(Settings {
                    bridge: url.map(|u| BridgeConfig {
                        url: Some(u.to_string()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            );
        }
        t
    }

    #[test]
    fn a_reload_attaches_new_bridges_and_detaches_removed_ones_only() {
        let bridges = Bridges::default();
        bridges
            .configure(&table(&[("a", Some("http://127.0.0.1:7001")), ("b", None)]))
            .unwrap();
        assert_eq!(
            bridges.slot(&Namespace::new("a")).get().unwrap().url(),
            "http://127.0.0.1:7001"
        );
        assert!(bridges.slot(&Namespace::new("b")).get().is_err());
        // b's bridge attached by `callbackd run --namespace b`, not by the config.
        let run = BridgeClient::new(
            "http://127.0.0.1:7009",
            None,
            None,
            "m".into(),
            String::new(),
        )
        .unwrap();
        bridges.slot(&Namespace::new("b")).attach(run);
        // a's bridge moves; b's supervised one stays.
        bridges
            .configure(&table(&[("a", Some("http://127.0.0.1:7002")), ("b", None)]))
            .unwrap();
        assert_eq!(
            bridges.slot(&Namespace::new("a")).get().unwrap().url(),
            "http://127.0.0.1:7002"
        );
        assert_eq!(
            bridges.slot(&Namespace::new("b")).get().unwrap().url(),
            "http://127.0.0.1:7009"
        );
        // a's configured bridge is gone from the config: detached.
        bridges.configure(&table(&[("b", None)])).unwrap();
        let err = bridges.slot(&Namespace::new("a")).get().err().unwrap();
        assert_eq!(err.code, ProblemCode::NotImplemented);
        // A bridge whose token file cannot be read refuses the reload, changing nothing.
        let mut bad = table(&[("c", Some("http://127.0.0.1:7003"))]);
        Arc::make_mut(bad.settings.get_mut(&Namespace::new("c")).unwrap())
            .bridge
            .as_mut()
            .unwrap()
            .token_file = Some("/nonexistent/token".into());
        let e = bridges.configure(&bad).unwrap_err();
        assert!(
            e.contains("namespaces[c].bridge") && e.contains("token_file"),
            "{e}"
        );
        assert_eq!(
            bridges.slot(&Namespace::new("b")).get().unwrap().url(),
            "http://127.0.0.1:7009"
        );
    }
}
