//! [`ToolService`]: the tool side of the daemon as its services share it (the bridge's tool
//! RPC through `tool_calls`, the run API's tool declarations): the registry, and the runtime
//! the calls run on.

use std::sync::{Arc, OnceLock};

use super::frontend::FrontendCalls;
use super::ToolRegistry;

/// The tool side of the daemon: the registry calls are dispatched to, and the runtime they
/// run on.
#[derive(Clone, Default)]
pub struct ToolService {
    registry: Arc<ToolRegistry>,
    /// The runtime the daemon was started on ([`ToolService::run_on`], by `App::run_until`):
    /// its main, work-stealing runtime. Connections are served on single-threaded runtimes
    /// (`server::ConnThreads`) where a tool that blocks its thread would stall every other
    /// connection of that thread; on this runtime the other workers carry on. Unset, tool
    /// calls run in the request's own task.
    runtime: Arc<OnceLock<tokio::runtime::Handle>>,
    /// AG-UI apps' frontend tools and their held calls: declared by the run API, held by
    /// the tool RPC.
    frontend: Arc<FrontendCalls>,
}

impl ToolService {
    pub fn new(registry: Arc<ToolRegistry>) -> Self {
        ToolService {
            registry,
            runtime: Arc::default(),
            frontend: Arc::default(),
        }
    }

    /// Runs tool calls on `runtime` from now on (the first call wins).
    pub fn run_on(&self, runtime: tokio::runtime::Handle) {
        let _ = self.runtime.set(runtime);
    }

    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    pub fn frontend(&self) -> &FrontendCalls {
        &self.frontend
    }

    /// The runtime tool calls run on, once set.
    pub fn runtime(&self) -> Option<tokio::runtime::Handle> {
        self.runtime.get().cloned()
    }
}
