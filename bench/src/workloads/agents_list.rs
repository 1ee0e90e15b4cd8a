//! `agents-list`: N agents in one workspace (created beforehand by 16 clients, untimed), paged
//! through with `agents.list {filter: {cwd, cursor}}` at the bridge's default page size (50)
//! by one client, several passes.
//!
//! Checks: a first, untimed read follows `nextCursor` and sees every agent exactly once, in
//! `updatedAt` desc, `agentId` desc order (a third of the agents share an `updatedAt` with a
//! neighbour, to exercise the tie-break), with a cursor on every page but the last. The timed
//! passes reuse its cursors and must return the same bytes page for page.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::{measure, no_cursor, output, Fingerprint, Measured};
use crate::client::{Conn, Recorder};
use crate::gen::{self, AgentState};
use crate::target::Target;

pub fn cwd(tag: &str) -> String {
    format!("/bench/{tag}/list")
}

/// Creates `n` agents in the list workspace with 16 clients.
pub async fn setup(target: &Target, tag: &str, n: usize, base_ms: u64) -> anyhow::Result<Measured> {
    let next = Arc::new(AtomicUsize::new(0));
    let tag = Arc::new(tag.to_string());
    let (m, _) = measure(target, 16, |_, mut conn: Conn| {
        let (next, tag) = (next.clone(), tag.clone());
        async move {
            let mut rec = Recorder::default();
            let cwd = cwd(&tag);
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= n {
                    break;
                }
                let id = format!("agent-{tag}-list-{k:06}");
                let agent = AgentState {
                    agent_id: &id,
                    cwd: &cwd,
                    status: "idle",
                    active_run: None,
                    latest_root: None,
                    created_at: base_ms,
                    updated_at: base_ms + (k / 3) as u64,
                };
                rec.call(&mut conn, agent.call("create")).await;
            }
            (rec, ())
        }
    })
    .await?;
    Ok(m)
}

/// Pages through the workspace `passes` times. `cursors`: the cursor of each page after the
/// first, from an earlier run (the null server cannot produce them); `None` (callbackd)
/// first reads every page untimed, checking it and collecting the cursors, and the timed
/// passes must then return the same bytes. Returns the cursors used.
pub async fn run(
    target: &Target,
    tag: &str,
    n: usize,
    passes: usize,
    cursors: Option<Arc<Vec<String>>>,
    verify: bool,
) -> anyhow::Result<(Measured, Arc<Vec<String>>)> {
    let cwd = Arc::new(cwd(tag));
    let (reference, cursors, problems) = match cursors {
        Some(c) => (Vec::new(), c, Vec::new()),
        None => {
            let (pages, cursors, problems) = checked_pages(target, &cwd, n).await?;
            (pages, Arc::new(cursors), problems)
        }
    };
    let reference: Arc<Vec<Fingerprint>> =
        Arc::new(reference.iter().map(|page| Fingerprint::of(page)).collect());
    let (mut m, _) = measure(target, 1, |_, mut conn: Conn| {
        let (cwd, cursors, reference) = (cwd.clone(), cursors.clone(), reference.clone());
        async move {
            let mut rec = Recorder::default();
            for pass in 0..passes {
                for p in 0..=cursors.len() {
                    let cursor = p.checked_sub(1).map(|i| cursors[i].as_str());
                    let body = gen::agents_list(&cwd, cursor);
                    let Some(answer) = rec.call(&mut conn, body).await else {
                        continue;
                    };
                    if verify && reference.get(p) != Some(&Fingerprint::of(&answer)) {
                        rec.wrong(format!(
                            "pass {pass} page {p} differs from the checked read"
                        ));
                    }
                }
            }
            (rec, ())
        }
    })
    .await?;
    for e in problems {
        m.wrong(e);
    }
    if verify && m.calls != passes * n.div_ceil(50) {
        m.wrong(format!(
            "{} pages read, expected {}",
            m.calls,
            passes * n.div_ceil(50)
        ));
    }
    Ok((m, cursors))
}

/// Reads every page once following `nextCursor`; checks that every agent is listed once, in
/// order, with a cursor on every page but the last. Returns the pages and cursors.
async fn checked_pages(
    target: &Target,
    cwd: &str,
    n: usize,
) -> anyhow::Result<(Vec<Bytes>, Vec<String>, Vec<String>)> {
    let mut conn = Conn::connect(target.ep.clone()).await?;
    let mut rec = Recorder::default();
    let (mut pages, mut cursors, mut problems) = (Vec::new(), Vec::new(), Vec::new());
    let mut seen: Items = Vec::new();
    loop {
        let body = gen::agents_list(cwd, cursors.last().map(String::as_str));
        let Some(answer) = rec.call(&mut conn, body).await else {
            problems.push(format!("page {}: {:?}", pages.len(), rec.examples.last()));
            break;
        };
        match page(&answer) {
            Ok((items, next)) => {
                seen.extend(items);
                pages.push(answer);
                match next {
                    Some(c) => cursors.push(c),
                    None => break,
                }
            }
            Err(e) => {
                problems.push(format!("page {}: {e}", pages.len()));
                break;
            }
        }
        if pages.len() > n {
            problems.push("more pages than agents: the cursor loops".into());
            break;
        }
    }
    if seen.len() != n {
        problems.push(format!("listed {} agents, expected {n}", seen.len()));
    }
    let ordered = seen
        .windows(2)
        .all(|w| w[0].0 > w[1].0 || (w[0].0 == w[1].0 && w[0].1 > w[1].1));
    if !ordered {
        problems.push("agents not in updatedAt desc, agentId desc order, or repeated".into());
    }
    Ok((pages, cursors, problems))
}

type Items = Vec<(f64, String)>;

fn page(answer: &[u8]) -> Result<(Items, Option<String>), String> {
    let o = output(answer)?.ok_or("no output")?;
    let items = o["items"].as_array().ok_or("no items")?;
    if items.is_empty() || items.len() > 50 {
        return Err(format!(
            "{} items on a page (default limit 50)",
            items.len()
        ));
    }
    let items = items
        .iter()
        .map(|a| Some((a["updatedAt"].as_f64()?, a["agentId"].as_str()?.to_string())))
        .collect::<Option<Vec<_>>>()
        .ok_or("an item without agentId/updatedAt")?;
    let next = if no_cursor(&o, "nextCursor") {
        None
    } else {
        Some(
            o["nextCursor"]
                .as_str()
                .ok_or("nextCursor is not a string")?
                .to_string(),
        )
    };
    Ok((items, next))
}
