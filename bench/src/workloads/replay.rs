//! `replay`: one run of N events (0.5–3 KB each, appended beforehand by 16 clients, untimed)
//! read back in pages of 100 by one client following `nextOffset`, several passes.
//!
//! Checks: beforehand (untimed) every page is read and parsed: 100 items (fewer on the
//! last), seqs continuing the previous page, `nextOffset` equal to the last offset and
//! present exactly while events remain. The timed passes must return the same bytes.

use std::sync::Arc;

use bytes::Bytes;

use super::{append, measure, no_cursor, output, Fingerprint, Measured};
use crate::client::{Conn, Recorder};
use crate::gen;
use crate::target::Target;

pub const PAGE: u64 = 100;

/// Fills the run (untimed, but checked like `append`); returns its id.
pub async fn setup(
    target: &Target,
    a: &Arc<append::Append>,
    verify: bool,
) -> anyhow::Result<(String, Measured)> {
    let m = append::run(target, a, "replay", 16, verify).await?;
    Ok((a.run_id("replay", 0), m))
}

pub async fn run(
    target: &Target,
    run_id: &str,
    events: u64,
    passes: usize,
    verify: bool,
) -> anyhow::Result<Measured> {
    let pages = events.div_ceil(PAGE);
    // Untimed: every page read and checked once, so that the timed passes measure the
    // server rather than the bench's JSON parser; they must return the same bytes.
    let (reference, mut problems) = if verify {
        checked_pages(target, run_id, events).await?
    } else {
        (Vec::new(), Vec::new())
    };
    let reference: Arc<Vec<Fingerprint>> =
        Arc::new(reference.iter().map(|page| Fingerprint::of(page)).collect());
    let run_id = Arc::new(run_id.to_string());
    let (mut m, _) = measure(target, 1, |_, mut conn: Conn| {
        let (run_id, reference) = (run_id.clone(), reference.clone());
        async move {
            let mut rec = Recorder::default();
            for pass in 0..passes {
                for p in 0..pages {
                    let after = (p > 0).then_some(p * PAGE);
                    let body = gen::events_list(&run_id, after);
                    let Some(answer) = rec.call(&mut conn, body).await else {
                        continue;
                    };
                    if verify && reference.get(p as usize) != Some(&Fingerprint::of(&answer)) {
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
    for e in problems.drain(..) {
        m.wrong(e);
    }
    if verify && m.calls as u64 != pages * passes as u64 {
        m.wrong(format!(
            "{} pages read, expected {}",
            m.calls,
            pages * passes as u64
        ));
    }
    Ok(m)
}

/// Reads every page once, following `nextOffset`, and checks each.
async fn checked_pages(
    target: &Target,
    run_id: &str,
    events: u64,
) -> anyhow::Result<(Vec<Bytes>, Vec<String>)> {
    let mut conn = Conn::connect(target.ep.clone()).await?;
    let mut rec = Recorder::default();
    let (mut pages, mut problems) = (Vec::new(), Vec::new());
    let mut after = None;
    for p in 0..events.div_ceil(PAGE) {
        let Some(answer) = rec.call(&mut conn, gen::events_list(run_id, after)).await else {
            problems.push(format!("page {p}: {:?}", rec.examples.last()));
            break;
        };
        if let Err(e) = check_page(&answer, run_id, p, events) {
            problems.push(e);
            break;
        }
        pages.push(answer);
        after = Some((p + 1) * PAGE);
    }
    Ok((pages, problems))
}

fn check_page(answer: &[u8], run_id: &str, p: u64, events: u64) -> Result<(), String> {
    let o = output(answer)?.ok_or_else(|| format!("page {p}: no output"))?;
    let items = o["items"]
        .as_array()
        .ok_or_else(|| format!("page {p}: no items"))?;
    let first = p * PAGE + 1;
    let last = (first + PAGE - 1).min(events);
    if items.len() as u64 != last + 1 - first {
        return Err(format!(
            "page {p}: {} items, expected {}",
            items.len(),
            last + 1 - first
        ));
    }
    for (j, item) in items.iter().enumerate() {
        let seq = first + j as u64;
        if item["seq"] != seq
            || item["offset"].as_str() != Some(seq.to_string().as_str())
            || item["runId"] != run_id
        {
            return Err(format!("page {p} item {j}: expected seq {seq}, got {item}"));
        }
    }
    let more = last < events;
    if more {
        if o["nextOffset"].as_str() != Some(last.to_string().as_str()) {
            return Err(format!(
                "page {p}: nextOffset {} (expected {last})",
                o["nextOffset"]
            ));
        }
    } else if !no_cursor(&o, "nextOffset") {
        return Err(format!("last page {p} has nextOffset {}", o["nextOffset"]));
    }
    Ok(())
}
