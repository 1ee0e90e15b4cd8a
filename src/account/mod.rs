//! The one account of every run: how the bridge's stored events plus callbackd's own records
//! of the run (tool calls, approvals, questions) become the run's events ([`Durable`], by
//! [`RunMapper`]) and the account of each tool call ([`ToolCall`]). The run API (its stream,
//! events pages, run state and per-call endpoint, AG-UI) and the traces (`telemetry`) all
//! tell a run through it, so they tell the same story, live and replayed.
//!
//! Where it sits: below the run API and telemetry, above the store, the tools and the
//! approvals' records; it knows nothing of HTTP (the API answers with it; `Problem` is here
//! only as the document a failed run's error is told in). Why a module of its own rather
//! than a bigger `run`: `run` is the run's vocabulary ([`crate::run::RunStatus`]) and sits
//! below the store, which announces a run's end in it (`StoreNotice::RunEnded`); this
//! module reads the store, so it must sit above it.
//!
//! - [`durable`]: the run's stream events and their JSON ([`event_json`]);
//! - [`mapper`]: stored events -> stream events, one run at a time ([`RunMapper`]);
//! - [`tool_call`]: the account of a tool call, from the events and [`Beside`] records;
//! - [`stored`]: the store reads it is made of ([`StoredEvent`], [`events_after`]);
//! - `glance`: an event document's kind, and a tool call without its content, unparsed
//!   but for the few fields a trace needs ([`glance()`]);
//! - [`sources`]: when the records are read again while mapping ([`RunSources`]);
//! - [`problem`]: a failed run's problem ([`run_problem`]); [`schema`]: OpenAPI shapes.

pub mod durable;
mod glance;
pub mod mapper;
pub mod problem;
pub mod schema;
pub mod sources;
pub mod stored;
pub mod tool_call;

pub use durable::FULL_VALUE_BYTES;
pub use durable::{event_json, Durable, RunInput};
pub use glance::{glance, Glance};
pub use mapper::{tool_arguments, RunMapper};
pub use problem::{run_problem, Problem, ProblemCode};
pub use sources::RunSources;
pub use stored::{
    events_after, listed, parse, run_doc, stored_event_of, Listed, ReadError, StoredEvent,
};
pub use tool_call::{Beside, Decision, QuestionRecord, ToolCall};
