//! Held calls as AG-UI interrupts, and `resume` entries as decisions. An approval of a held
//! call is the interrupt `{id: <approval id>, reason: "tool_approval", toolCallId, message,
//! responseSchema, expiresAt}`; an `ask_user` question is `reason: "input_required"`. The
//! answers are decisions on the same approval records as the console's (`/v1/approvals`):
//! `resolved` with `{approved: true, arguments?}` approves (edited arguments checked against
//! the tool's input schema, as the console's are), `{approved: false, reason?}` or status
//! `cancelled` denies; `{answer}` answers a question.

use serde_json::{json, Value};

use super::super::problem::{Problem, ProblemCode};
use super::super::ApiState;
use super::input::ResumeEntry;
use crate::approvals::{ApprovalView, DecideError, Decision};
use crate::store::approvals::ApprovalRecord;
use crate::store::Namespace;
use crate::tools::builtin::ask_user;

/// The interrupt of a pending approval.
pub fn interrupt(state: &ApiState, a: &ApprovalView) -> Value {
    if a.tool == ask_user::NAME {
        let question = a.args.get("question").and_then(Value::as_str).unwrap_or("");
        let options: Vec<Value> = a
            .args
            .get("options")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut answer = json!({"type": "string", "description": "One of the options, or the person's own words"});
        if !options.is_empty() {
            answer["examples"] = Value::Array(options);
        }
        let mut out = json!({
            "id": a.id,
            "reason": "input_required",
            "message": question,
            "responseSchema": {
                "type": "object",
                "properties": {"answer": answer},
                "required": ["answer"],
            },
            "expiresAt": a.expires_at,
        });
        if let Some(call) = &a.tool_call_id {
            out["toolCallId"] = json!(call);
        }
        return out;
    }
    let arguments = state
        .tools()
        .registry()
        .get(&a.tool)
        .map(|t| t.input_schema().as_value().clone())
        .unwrap_or_else(|| json!({"type": "object"}));
    let mut out = json!({
        "id": a.id,
        "reason": "tool_approval",
        "message": format!("The agent wants to run {} with {}: approve?", a.tool, a.args),
        "responseSchema": {
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "arguments": arguments,
                "reason": {"type": "string", "description": "Why (told to the model with a denial)"},
            },
            "required": ["approved"],
        },
        "expiresAt": a.expires_at,
        "metadata": {"tool": a.tool, "arguments": a.args, "sessionId": a.session_id},
    });
    if let Some(call) = &a.tool_call_id {
        out["toolCallId"] = json!(call);
    }
    out
}

/// `409`: an interrupt that cannot be answered.
fn conflict(detail: String) -> Problem {
    let mut p = Problem::new(ProblemCode::FailedPrecondition, detail);
    p.status = http::StatusCode::CONFLICT.as_u16();
    p
}

/// The decisions `resume` asks for, checked before any is made (a refused entry leaves
/// every interrupt pending): each names a pending approval of `session`, with an answer of
/// the right shape. The run they hold (all of one run).
pub async fn check(
    state: &ApiState,
    ns: &Namespace,
    session: Option<&str>,
    resume: &[ResumeEntry],
) -> Result<(String, Vec<(String, Decision)>), Problem> {
    let by = format!("{}/{} (AG-UI)", ns.as_str(), state.config().label);
    let mut run = None;
    let mut out = Vec::new();
    for (i, entry) in resume.iter().enumerate() {
        let id = &entry.interrupt_id;
        let rec = state.approvals().records().approval(ns, id).await?;
        let rec = match rec {
            Some(rec) if Some(rec.agent_id.as_str()) == session => rec,
            _ => {
                return Err(conflict(format!(
                    "resume[{i}]: this thread has no interrupt {id:?} (the last RUN_FINISHED's \
                     outcome.interrupts lists the open ones)"
                )))
            }
        };
        if rec.state != "pending" {
            let why = super::super::approvals::conflict(&rec).detail;
            return Err(conflict(format!(
                "resume[{i}]: interrupt {id} cannot be answered: {why}"
            )));
        }
        let rec_run = rec.run_id.clone().unwrap_or_default();
        match &run {
            None => run = Some(rec_run),
            Some(r) if *r != rec_run => {
                return Err(Problem::invalid(format!(
                    "resume[{i}]: interrupt {id} belongs to run {rec_run}, the others to {r}: \
                     answer one run's interrupts at a time"
                )))
            }
            Some(_) => {}
        }
        let decision = decision(state, &rec, entry, by.clone())
            .map_err(|e| Problem::invalid(format!("resume[{i}]: {e}")))?;
        out.push((id.clone(), decision));
    }
    Ok((run.unwrap_or_default(), out))
}

/// The decision an entry asks for on `rec`, or why it cannot be taken.
fn decision(
    state: &ApiState,
    rec: &ApprovalRecord,
    entry: &ResumeEntry,
    by: String,
) -> Result<Decision, String> {
    let deny = |reason: Option<String>| Decision {
        approve: false,
        by: by.clone(),
        reason,
        args: None,
    };
    if !entry.resolved {
        return Ok(deny(Some("cancelled by the AG-UI client".into())));
    }
    let payload = entry.payload.as_object();
    if rec.tool == ask_user::NAME {
        let answer = match payload.and_then(|p| p.get("answer")) {
            Some(Value::String(a)) => a.clone(),
            _ => {
                return Err(format!(
                    "interrupt {} is a question: answer with payload {{\"answer\": \"...\"}} \
                     (or status \"cancelled\")",
                    rec.id
                ))
            }
        };
        return Ok(Decision {
            approve: true,
            by,
            reason: None,
            args: Some(super::super::questions::with_answer(&rec.args, &answer)),
        });
    }
    let approved = match payload.and_then(|p| p.get("approved")) {
        Some(Value::Bool(b)) => *b,
        _ => {
            return Err(format!(
                "interrupt {} is a tool approval: payload.approved must be true or false",
                rec.id
            ))
        }
    };
    let reason = payload
        .and_then(|p| p.get("reason"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if !approved {
        return Ok(deny(reason));
    }
    let args = payload
        .and_then(|p| p.get("arguments"))
        .filter(|a| !a.is_null())
        .cloned();
    if let Some(args) = &args {
        super::super::approvals::check_args(state, rec, args).map_err(|p| p.detail)?;
    }
    Ok(Decision {
        approve: true,
        by,
        reason,
        args,
    })
}

/// Makes the checked decisions. One decided elsewhere in between is a `409` naming it
/// (those before it stand: each is a person's decision like any other).
pub async fn decide(
    state: &ApiState,
    ns: &Namespace,
    decisions: Vec<(String, Decision)>,
) -> Result<(), Problem> {
    for (id, decision) in decisions {
        match state.approvals().decide(ns, &id, decision).await {
            Ok(_) => {}
            Err(DecideError::NotFound(_)) => {
                return Err(conflict(format!("interrupt {id} is gone")))
            }
            Err(DecideError::Decided(rec)) => {
                return Err(conflict(format!(
                    "interrupt {id} cannot be answered: {}",
                    super::super::approvals::conflict(&rec).detail
                )))
            }
            Err(DecideError::Store(e)) => return Err(e.into()),
        }
    }
    Ok(())
}

/// `409` for a new user message while the thread's run waits on interrupts, naming them.
pub async fn waiting(state: &ApiState, ns: &Namespace, session: &str) -> Result<(), Problem> {
    let pending: Vec<ApprovalRecord> = state
        .approvals()
        .records()
        .approvals(ns, Some("pending"))
        .await?
        .into_iter()
        .filter(|r| r.agent_id == session)
        .collect();
    if pending.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = pending
        .iter()
        .map(|r| {
            format!(
                "{} ({} call {})",
                r.id,
                r.tool,
                r.tool_call_id.as_deref().unwrap_or("?")
            )
        })
        .collect();
    Err(conflict(format!(
        "the thread's run waits on interrupt {}: answer it with resume: [{{\"interruptId\": \
         \"{}\", \"status\": \"resolved\", \"payload\": {{...}}}}] before a new user message",
        ids.join(", "),
        pending[0].id
    )))
}
