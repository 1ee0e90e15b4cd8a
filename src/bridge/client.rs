//! [`BridgeClient`]: the bridge the run API drives for its writes (`CreateAgent`,
//! `ResumeAgent`, `Send`, `CancelRun`, `CloseAgent`, `DeleteAgent`), as a Connect client.

use serde_json::{json, Value};

use crate::config::BridgeConfig;
use crate::connect::client::{ClientError, ConnectClient, MessageStream};

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

    /// From a configured bridge whose `url` is set; `section` names it in messages
    /// (`namespaces[NAME].bridge`). Without `default_cwd`, sessions created without a `cwd`
    /// work in the daemon's working directory (as `[bridge] default_cwd` documents): such a
    /// bridge has no ready line to say its workspace.
    pub fn from_config(cfg: &BridgeConfig, section: &str) -> Result<Self, String> {
        let url = cfg
            .url
            .as_deref()
            .ok_or_else(|| format!("{section}.url is not set"))?;
        let token = cfg
            .token_source(&format!("{section}.token"))
            .resolve(&|k| std::env::var(k).ok())
            .map_err(|e| e.to_string())?;
        BridgeClient::new(
            url,
            token.map(|t| t.expose().to_string()),
            cfg.default_cwd.clone().or_else(|| {
                std::env::current_dir()
                    .ok()
                    .map(|d| d.to_string_lossy().into_owned())
            }),
            cfg.model(),
            cfg.api_key(),
        )
        .map_err(|e| format!("{section}: {e}"))
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

    /// `CloseAgent`: the bridge disposes of the agent and forgets it (a later `Send` to it
    /// is `not_found` "Unknown agent"). The stored agent stays.
    pub async fn close_agent(&self, agent_id: &str) -> Result<(), ClientError> {
        self.client
            .unary(
                &format!("{SERVICE}CloseAgent"),
                &json!({"agentId": agent_id}),
            )
            .await
            .map(drop)
    }

    /// `DeleteAgent`: the SDK deletes the agent's runs, their events, its checkpoints and
    /// the agent from the store (callbackd's, through the store callback). It refuses an
    /// agent whose active run is not terminal, and it does NOT drop the agent from the
    /// bridge's registry (cursor-sdk 1.1.0; a `Send` then fails `internal` "Agent … not
    /// found"): [`close_agent`](Self::close_agent) does that.
    pub async fn delete_agent(&self, agent_id: &str, cwd: &str) -> Result<(), ClientError> {
        self.client
            .unary(
                &format!("{SERVICE}DeleteAgent"),
                &json!({"agentId": agent_id, "options": {"cwd": cwd, "apiKey": self.api_key}}),
            )
            .await
            .map(drop)
    }
}
