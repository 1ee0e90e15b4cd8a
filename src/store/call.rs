//! [`StoreCall`]: a `CallStore` request parsed once, at the edge, into a typed operation.
//! Everything downstream trusts these types and never looks at the raw input again.

use std::collections::HashMap;

use base64::alphabet::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde_json::value::RawValue;

use super::{AgentCursor, JsonText, RunCursor, StoreError};

/// Default page size of the catalog lists (agents, runs, checkpoints).
pub const DEFAULT_CATALOG_LIMIT: usize = 50;
/// Default page size of `runEvents.list`.
pub const DEFAULT_EVENTS_LIMIT: usize = 100;

/// Standard base64 (what the bridge sends), padding optional.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// An agent document: the keys the store indexes, plus the whole document as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDoc {
    pub agent_id: String,
    pub cwd: String,
    /// `updatedAt` (epoch ms); 0 when the document has none.
    pub updated_at: f64,
    pub json: JsonText,
}

/// A run document: the keys the store indexes, plus the whole document as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RunDoc {
    pub agent_id: String,
    pub run_id: String,
    /// `turnNumber`; 0 when the document has none.
    pub turn_number: f64,
    pub json: JsonText,
}

/// A `runEvents.append` input.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub run_id: String,
    pub event_type: String,
    /// The payload as JSON text; `null` when the append had none.
    pub payload: JsonText,
    pub payload_ref: Option<String>,
    pub idempotency_key: Option<String>,
    /// The namespace's `max_events_per_run` quota, set by the caller after parsing (never
    /// from the request): checked inside the append's transaction against the seq it
    /// assigns, so it is exact and costs nothing extra.
    pub max_events: Option<u64>,
}

impl NewEvent {
    /// The quota error of an append that would get `seq`, if that is over `max_events`.
    pub fn over_quota(&self, ns: &super::Namespace, seq: i64) -> Option<super::StoreError> {
        let max = self.max_events?;
        (u64::try_from(seq).unwrap_or(0) > max).then(|| {
            super::StoreError::Quota(format!(
                "namespace {} is at its max_events_per_run quota ({max}) for run {}; nothing \
                 was written",
                ns.as_str(),
                self.run_id
            ))
        })
    }
}

/// One page of a list: where to start and how many items at most.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<C> {
    pub cursor: Option<C>,
    pub limit: usize,
}

/// `agents` filter. `None` (absent or `[]`) does not constrain.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentFilter {
    pub agent_ids: Option<Vec<String>>,
    pub cwd: Option<String>,
}

/// `runs` filter. Both lists present means AND.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    pub agent_ids: Option<Vec<String>>,
    pub run_ids: Option<Vec<String>>,
}

/// `checkpoints` filter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckpointFilter {
    pub agent_ids: Option<Vec<String>>,
    pub blob_ids: Option<Vec<String>>,
}

/// One store operation with its input, as the contract's operation matrix (§2.1) lists them.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreCall {
    AgentsGet {
        agent_id: String,
    },
    AgentsCreate(AgentDoc),
    AgentsUpdate(AgentDoc),
    AgentsDelete(AgentFilter),
    AgentsList(AgentFilter, Page<AgentCursor>),
    RunsGet {
        agent_id: String,
        run_id: String,
    },
    RunsCreate(RunDoc),
    RunsUpdate(RunDoc),
    RunsDelete(RunFilter),
    RunsList(RunFilter, Page<RunCursor>),
    EventsAppend(NewEvent),
    /// Events with `seq > after_seq`, in seq order.
    EventsList {
        run_id: String,
        after_seq: u64,
        limit: usize,
    },
    /// `None` deletes the events of every run.
    EventsDelete {
        run_ids: Option<Vec<String>>,
    },
    CheckpointsGet {
        agent_id: String,
        blob_id: String,
    },
    CheckpointsCreate {
        agent_id: String,
        blob_id: String,
        data: Vec<u8>,
    },
    CheckpointsUpdate {
        agent_id: String,
        blob_id: String,
        data: Vec<u8>,
    },
    CheckpointsDelete(CheckpointFilter),
    /// The cursor is the last blob id of the previous page.
    CheckpointsList(CheckpointFilter, Page<String>),
}

impl StoreCall {
    /// Parses `{substore, method, input}`; `input` is the JSON text of the input object.
    pub fn parse(substore: &str, method: &str, input: &str) -> Result<StoreCall, StoreError> {
        let f = Fields::parse(input, "input")?;
        let call = match (substore, method) {
            ("agents", "get") => StoreCall::AgentsGet {
                agent_id: f.id("agentId")?,
            },
            ("agents", "create") => StoreCall::AgentsCreate(agent_doc(&f)?),
            ("agents", "update") => StoreCall::AgentsUpdate(agent_doc(&f)?),
            ("agents", "delete") => StoreCall::AgentsDelete(agent_filter(&f.filter(true)?)?),
            ("agents", "list") => {
                let filter = f.filter(false)?;
                let page = page(&filter, DEFAULT_CATALOG_LIMIT, AgentCursor::decode)?;
                StoreCall::AgentsList(agent_filter(&filter)?, page)
            }
            ("runs", "get") => StoreCall::RunsGet {
                agent_id: f.id("agentId")?,
                run_id: f.id("runId")?,
            },
            ("runs", "create") => StoreCall::RunsCreate(run_doc(&f)?),
            ("runs", "update") => StoreCall::RunsUpdate(run_doc(&f)?),
            ("runs", "delete") => StoreCall::RunsDelete(run_filter(&f.filter(true)?)?),
            ("runs", "list") => {
                let filter = f.filter(false)?;
                let page = page(&filter, DEFAULT_CATALOG_LIMIT, RunCursor::decode)?;
                StoreCall::RunsList(run_filter(&filter)?, page)
            }
            ("runEvents", "append") => StoreCall::EventsAppend(NewEvent {
                run_id: f.id("runId")?,
                event_type: f.string("eventType")?,
                payload: f
                    .get("payload")
                    .map_or_else(JsonText::null, JsonText::from_raw),
                payload_ref: f.opt_string("payloadRef")?,
                idempotency_key: f.opt_string("idempotencyKey")?,
                max_events: None,
            }),
            ("runEvents", "list") => StoreCall::EventsList {
                run_id: f.id("runId")?,
                after_seq: after_offset(&f)?,
                limit: f.opt_limit("limit")?.unwrap_or(DEFAULT_EVENTS_LIMIT),
            },
            ("runEvents", "delete") => StoreCall::EventsDelete {
                run_ids: f.filter(true)?.opt_list("runIds")?,
            },
            ("checkpoints", "get") => StoreCall::CheckpointsGet {
                agent_id: f.id("agentId")?,
                blob_id: f.id("blobId")?,
            },
            ("checkpoints", "create") => StoreCall::CheckpointsCreate {
                agent_id: f.id("agentId")?,
                blob_id: f.id("blobId")?,
                data: blob_data(&f)?,
            },
            ("checkpoints", "update") => StoreCall::CheckpointsUpdate {
                agent_id: f.id("agentId")?,
                blob_id: f.id("blobId")?,
                data: blob_data(&f)?,
            },
            ("checkpoints", "delete") => {
                StoreCall::CheckpointsDelete(checkpoint_filter(&f.filter(true)?)?)
            }
            ("checkpoints", "list") => {
                let filter = f.filter(false)?;
                let page = page(&filter, DEFAULT_CATALOG_LIMIT, |s| Ok(s.to_string()))?;
                StoreCall::CheckpointsList(checkpoint_filter(&filter)?, page)
            }
            ("agents" | "runs" | "runEvents" | "checkpoints", _) => {
                return Err(StoreError::invalid(format!(
                    "unknown {substore} method {method:?}: expected one of {}",
                    methods_of(substore)
                )))
            }
            _ => {
                return Err(StoreError::invalid(format!(
                    "unknown substore {substore:?}: expected agents, runs, runEvents or checkpoints"
                )))
            }
        };
        Ok(call)
    }

    /// Every `substore.method` there is ([`name`](Self::name) of each kind of call): a log
    /// line or metric names a refused call by one of these, never by a name as sent.
    pub const NAMES: [&'static str; 18] = [
        "agents.get",
        "agents.create",
        "agents.update",
        "agents.delete",
        "agents.list",
        "runs.get",
        "runs.create",
        "runs.update",
        "runs.delete",
        "runs.list",
        "runEvents.append",
        "runEvents.list",
        "runEvents.delete",
        "checkpoints.get",
        "checkpoints.create",
        "checkpoints.update",
        "checkpoints.delete",
        "checkpoints.list",
    ];

    /// `substore.method`, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            StoreCall::AgentsGet { .. } => "agents.get",
            StoreCall::AgentsCreate(_) => "agents.create",
            StoreCall::AgentsUpdate(_) => "agents.update",
            StoreCall::AgentsDelete(_) => "agents.delete",
            StoreCall::AgentsList(..) => "agents.list",
            StoreCall::RunsGet { .. } => "runs.get",
            StoreCall::RunsCreate(_) => "runs.create",
            StoreCall::RunsUpdate(_) => "runs.update",
            StoreCall::RunsDelete(_) => "runs.delete",
            StoreCall::RunsList(..) => "runs.list",
            StoreCall::EventsAppend(_) => "runEvents.append",
            StoreCall::EventsList { .. } => "runEvents.list",
            StoreCall::EventsDelete { .. } => "runEvents.delete",
            StoreCall::CheckpointsGet { .. } => "checkpoints.get",
            StoreCall::CheckpointsCreate { .. } => "checkpoints.create",
            StoreCall::CheckpointsUpdate { .. } => "checkpoints.update",
            StoreCall::CheckpointsDelete(_) => "checkpoints.delete",
            StoreCall::CheckpointsList(..) => "checkpoints.list",
        }
    }

    /// The call with any list `limit` cut to `max` (`store.max_page_size`): the rest
    /// follows through the cursor.
    pub fn clamp(self, max: usize) -> StoreCall {
        let max = max.max(1);
        match self {
            StoreCall::AgentsList(f, mut p) => {
                p.limit = p.limit.min(max);
                StoreCall::AgentsList(f, p)
            }
            StoreCall::RunsList(f, mut p) => {
                p.limit = p.limit.min(max);
                StoreCall::RunsList(f, p)
            }
            StoreCall::CheckpointsList(f, mut p) => {
                p.limit = p.limit.min(max);
                StoreCall::CheckpointsList(f, p)
            }
            StoreCall::EventsList {
                run_id,
                after_seq,
                limit,
            } => StoreCall::EventsList {
                run_id,
                after_seq,
                limit: limit.min(max),
            },
            other => other,
        }
    }

    /// Whether the call changes stored data (and so goes through the writer).
    pub fn is_write(&self) -> bool {
        !matches!(
            self,
            StoreCall::AgentsGet { .. }
                | StoreCall::AgentsList(..)
                | StoreCall::RunsGet { .. }
                | StoreCall::RunsList(..)
                | StoreCall::EventsList { .. }
                | StoreCall::CheckpointsGet { .. }
                | StoreCall::CheckpointsList(..)
        )
    }
}

fn methods_of(substore: &str) -> &'static str {
    match substore {
        "runEvents" => "append, list, delete",
        _ => "get, create, update, delete, list",
    }
}

fn agent_doc(f: &Fields<'_>) -> Result<AgentDoc, StoreError> {
    let raw = f.object("agent")?;
    let doc = Fields::parse(raw.get(), "agent")?;
    Ok(AgentDoc {
        agent_id: doc.id("agentId")?,
        cwd: doc.string("cwd")?,
        updated_at: doc.opt_number("updatedAt")?.unwrap_or(0.0),
        json: JsonText::from_raw(raw),
    })
}

fn run_doc(f: &Fields<'_>) -> Result<RunDoc, StoreError> {
    let raw = f.object("run")?;
    let doc = Fields::parse(raw.get(), "run")?;
    Ok(RunDoc {
        agent_id: doc.id("agentId")?,
        run_id: doc.id("runId")?,
        turn_number: doc.opt_number("turnNumber")?.unwrap_or(0.0),
        json: JsonText::from_raw(raw),
    })
}

fn agent_filter(f: &Fields<'_>) -> Result<AgentFilter, StoreError> {
    Ok(AgentFilter {
        agent_ids: f.opt_list("agentIds")?,
        cwd: f.opt_string("cwd")?,
    })
}

fn run_filter(f: &Fields<'_>) -> Result<RunFilter, StoreError> {
    Ok(RunFilter {
        agent_ids: f.opt_list("agentIds")?,
        run_ids: f.opt_list("runIds")?,
    })
}

fn checkpoint_filter(f: &Fields<'_>) -> Result<CheckpointFilter, StoreError> {
    Ok(CheckpointFilter {
        agent_ids: f.opt_list("agentIds")?,
        blob_ids: f.opt_list("blobIds")?,
    })
}

fn page<C>(
    filter: &Fields<'_>,
    default_limit: usize,
    decode: impl Fn(&str) -> Result<C, StoreError>,
) -> Result<Page<C>, StoreError> {
    // The bridge treats "" like an absent cursor, and so do we.
    let cursor = match filter.opt_string("cursor")? {
        Some(c) if !c.is_empty() => Some(decode(&c)?),
        _ => None,
    };
    Ok(Page {
        cursor,
        limit: filter.opt_limit("limit")?.unwrap_or(default_limit),
    })
}

/// `afterOffset`: absent, null or "" means from the start; otherwise the decimal seq of
/// the last event already seen (exclusive).
fn after_offset(f: &Fields<'_>) -> Result<u64, StoreError> {
    let Some(raw) = f.get("afterOffset") else {
        return Ok(0);
    };
    let invalid = || StoreError::invalid(format!("invalid run event offset {}", raw.get()));
    if let Ok(s) = serde_json::from_str::<String>(raw.get()) {
        if s.is_empty() {
            return Ok(0);
        }
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        return s.parse().map_err(|_| invalid());
    }
    serde_json::from_str::<u64>(raw.get()).map_err(|_| invalid())
}

fn blob_data(f: &Fields<'_>) -> Result<Vec<u8>, StoreError> {
    let data = f.string("data")?;
    BASE64
        .decode(data.as_bytes())
        .map_err(|e| StoreError::invalid(format!("input.data is not valid base64: {e}")))
}

/// An object's members, refusing a key that appears twice. Parsers disagree on which
/// duplicate wins, and here the choice decides what is stored or deleted: with last-wins,
/// `{"filter":{"runIds":["r"],"runIds":null}}` would read as a delete of every run.
struct UniqueKeys<'a>(HashMap<String, &'a RawValue>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for UniqueKeys<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Members<'a> {
            type Value = UniqueKeys<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut members: A,
            ) -> Result<Self::Value, A::Error> {
                let mut map = HashMap::with_capacity(members.size_hint().unwrap_or(8));
                while let Some((key, value)) = members.next_entry::<String, &'de RawValue>()? {
                    if map.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
                    }
                    map.insert(key, value);
                }
                Ok(UniqueKeys(map))
            }
        }
        d.deserialize_map(Members(std::marker::PhantomData))
    }
}

/// The top-level keys of a JSON object, each value left as raw JSON text. Nested values are
/// never parsed; `null` values count as absent.
struct Fields<'a> {
    map: HashMap<String, &'a RawValue>,
    /// Where these fields sit, for messages: "input", "input.filter", "agent".
    path: &'static str,
}

impl<'a> Fields<'a> {
    fn parse(json: &'a str, path: &'static str) -> Result<Self, StoreError> {
        if !json.trim_start().starts_with('{') {
            return Err(StoreError::invalid(format!("{path} must be a JSON object")));
        }
        let UniqueKeys(map) = serde_json::from_str(json)
            .map_err(|e| StoreError::invalid(format!("{path} is not a valid JSON object: {e}")))?;
        Ok(Fields { map, path })
    }

    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.map.get(key).copied().filter(|raw| raw.get() != "null")
    }

    fn required(&self, key: &str) -> Result<&'a RawValue, StoreError> {
        self.get(key)
            .ok_or_else(|| StoreError::invalid(format!("{}.{key} is required", self.path)))
    }

    fn string(&self, key: &str) -> Result<String, StoreError> {
        serde_json::from_str(self.required(key)?.get())
            .map_err(|_| StoreError::invalid(format!("{}.{key} must be a string", self.path)))
    }

    /// A required, non-empty string.
    fn id(&self, key: &str) -> Result<String, StoreError> {
        let s = self.string(key)?;
        if s.is_empty() {
            return Err(StoreError::invalid(format!(
                "{}.{key} must not be empty",
                self.path
            )));
        }
        Ok(s)
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.get(key).map(|_| self.string(key)).transpose()
    }

    fn opt_number(&self, key: &str) -> Result<Option<f64>, StoreError> {
        self.get(key)
            .map(|raw| {
                serde_json::from_str::<f64>(raw.get()).map_err(|_| {
                    StoreError::invalid(format!("{}.{key} must be a number", self.path))
                })
            })
            .transpose()
    }

    /// A non-negative integer (proto Struct numbers are doubles, so `2.0` counts too).
    fn opt_limit(&self, key: &str) -> Result<Option<usize>, StoreError> {
        let Some(n) = self.opt_number(key)? else {
            return Ok(None);
        };
        if n < 0.0 || n.fract() != 0.0 || !n.is_finite() {
            return Err(StoreError::invalid(format!(
                "{}.{key} must be a non-negative integer",
                self.path
            )));
        }
        Ok(Some(if n > usize::MAX as f64 {
            usize::MAX
        } else {
            n as usize
        }))
    }

    /// A list of strings; absent, null or `[]` give `None` (no constraint).
    fn opt_list(&self, key: &str) -> Result<Option<Vec<String>>, StoreError> {
        let Some(raw) = self.get(key) else {
            return Ok(None);
        };
        let list: Vec<String> = serde_json::from_str(raw.get()).map_err(|_| {
            StoreError::invalid(format!("{}.{key} must be a list of strings", self.path))
        })?;
        Ok(if list.is_empty() { None } else { Some(list) })
    }

    fn object(&self, key: &str) -> Result<&'a RawValue, StoreError> {
        let raw = self.required(key)?;
        if !raw.get().starts_with('{') {
            return Err(StoreError::invalid(format!(
                "{}.{key} must be a JSON object",
                self.path
            )));
        }
        Ok(raw)
    }

    /// `input.filter` as fields. A delete must carry one (an object, possibly empty): a
    /// missing or mistyped filter is never read as "everything".
    fn filter(&self, required: bool) -> Result<Fields<'a>, StoreError> {
        let raw = if required {
            Some(self.object("filter")?)
        } else {
            self.get("filter")
                .map(|_| self.object("filter"))
                .transpose()?
        };
        match raw {
            Some(raw) => Fields::parse(raw.get(), "input.filter"),
            None => Ok(Fields {
                map: HashMap::new(),
                path: "input.filter",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lists_every_call_and_only_those() {
        for name in StoreCall::NAMES {
            let (sub, method) = name.split_once('.').unwrap();
            match StoreCall::parse(sub, method, "{}") {
                Ok(call) => assert_eq!(call.name(), name),
                Err(e) => assert!(!e.to_string().contains("unknown"), "{name}: {e}"),
            }
        }
        let unknown = StoreCall::parse("agents", "append", "{}").unwrap_err();
        assert!(unknown.to_string().contains("unknown"), "{unknown}");
    }

    fn parse(sub: &str, method: &str, input: &str) -> Result<StoreCall, String> {
        StoreCall::parse(sub, method, input).map_err(|e| e.to_string())
    }

    #[test]
    fn agent_documents_are_kept_verbatim() {
        let doc =
            r#"{"agentId":"a1","cwd":"/ws","updatedAt":1780000000000,"x":{"y":[1,null]},"n":1.50}"#;
        let call = parse("agents", "create", &format!(r#"{{"agent":{doc}}}"#)).unwrap();
        let StoreCall::AgentsCreate(a) = call else {
            panic!()
        };
        assert_eq!(a.json.as_str(), doc);
        assert_eq!(a.agent_id, "a1");
        assert_eq!(a.updated_at, 1_780_000_000_000.0);
    }

    #[test]
    fn wrong_types_are_named() {
        assert_eq!(
            parse("agents", "get", r#"{"agentId":5}"#).unwrap_err(),
            "input.agentId must be a string"
        );
        assert_eq!(
            parse("agents", "get", "{}").unwrap_err(),
            "input.agentId is required"
        );
        assert_eq!(
            parse("agents", "create", r#"{"agent":[]}"#).unwrap_err(),
            "input.agent must be a JSON object"
        );
        assert_eq!(
            parse("runs", "create", r#"{"run":{"agentId":"a"}}"#).unwrap_err(),
            "run.runId is required"
        );
        assert_eq!(
            parse(
                "checkpoints",
                "create",
                r#"{"agentId":"a","blobId":"b","data":"@@"}"#
            )
            .unwrap_err()
            .split(':')
            .next()
            .unwrap(),
            "input.data is not valid base64"
        );
        assert!(parse("agents", "list", r#"{"filter":{"limit":-1}}"#).is_err());
        assert!(parse("agents", "list", r#"{"filter":{"limit":1.5}}"#).is_err());
        assert!(parse("runs", "list", r#"{"filter":{"agentIds":"a"}}"#).is_err());
    }

    #[test]
    fn duplicate_keys_are_refused_where_they_are_read() {
        for (sub, method, input) in [
            ("agents", "get", r#"{"agentId":"a","agentId":"b"}"#),
            ("agents", "get", r#"{"agentId":"a","agent\u0049d":"b"}"#),
            (
                "runs",
                "delete",
                r#"{"filter":{"runIds":["r"],"runIds":null}}"#,
            ),
            (
                "runs",
                "delete",
                r#"{"filter":{},"filter":{"runIds":["r"]}}"#,
            ),
            (
                "agents",
                "create",
                r#"{"agent":{"agentId":"a","cwd":"/","cwd":"/x"}}"#,
            ),
        ] {
            let err = parse(sub, method, input).unwrap_err();
            assert!(err.contains("duplicate key"), "{input}: {err}");
        }
        // Inside a document's own values nothing is read, so nothing is refused.
        let doc = r#"{"agent":{"agentId":"a","cwd":"/","x":{"k":1,"k":2}}}"#;
        assert!(parse("agents", "create", doc).is_ok());
    }

    #[test]
    fn deletes_need_an_object_filter() {
        for sub in ["agents", "runs", "runEvents", "checkpoints"] {
            assert!(parse(sub, "delete", "{}").is_err(), "{sub}");
            assert!(
                parse(sub, "delete", r#"{"filter":"all"}"#).is_err(),
                "{sub}"
            );
            assert!(parse(sub, "delete", r#"{"filter":[]}"#).is_err(), "{sub}");
            assert!(parse(sub, "delete", r#"{"filter":{}}"#).is_ok(), "{sub}");
        }
    }

    #[test]
    fn after_offset_is_exclusive_and_strict() {
        let list = |o: &str| {
            parse(
                "runEvents",
                "list",
                &format!(r#"{{"runId":"r","afterOffset":{o}}}"#),
            )
        };
        assert!(matches!(
            list(r#""7""#).unwrap(),
            StoreCall::EventsList { after_seq: 7, .. }
        ));
        assert!(matches!(
            list(r#""""#).unwrap(),
            StoreCall::EventsList { after_seq: 0, .. }
        ));
        assert!(matches!(
            list("null").unwrap(),
            StoreCall::EventsList {
                after_seq: 0,
                limit: 100,
                ..
            }
        ));
        for bad in [
            r#""x""#,
            r#""-1""#,
            r#""1.5""#,
            r#""99999999999999999999999""#,
            "true",
        ] {
            assert!(
                list(bad)
                    .unwrap_err()
                    .starts_with("invalid run event offset"),
                "{bad}"
            );
        }
    }

    #[test]
    fn empty_lists_do_not_constrain_and_empty_cursor_is_absent() {
        let call = parse("runs", "list", r#"{"filter":{"agentIds":[],"cursor":""}}"#).unwrap();
        assert_eq!(
            call,
            StoreCall::RunsList(
                RunFilter::default(),
                Page {
                    cursor: None,
                    limit: 50
                }
            )
        );
    }

    #[test]
    fn unknown_substores_and_methods_are_named() {
        assert!(parse("agentz", "get", "{}")
            .unwrap_err()
            .contains("unknown substore \"agentz\""));
        assert!(parse("runEvents", "get", "{}")
            .unwrap_err()
            .contains("append, list, delete"));
    }
}
