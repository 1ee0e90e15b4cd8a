//! The metrics as `/metrics` prints them.

use super::*;
use crate::store::Namespace;

fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find(|l| l.starts_with(prefix))
}

#[test]
fn calls_are_counted_by_label_with_their_latency() {
    let m = Metrics::default();
    m.store_call(
        "default",
        "runEvents.append",
        "ok",
        Duration::from_micros(80),
    );
    m.store_call(
        "default",
        "runEvents.append",
        "ok",
        Duration::from_millis(3),
    );
    m.store_call(
        "a",
        "agents.get",
        "invalid_argument",
        Duration::from_micros(20),
    );
    m.tool_call("default", "echo", "ok", Duration::from_millis(2));
    m.quota_refused("a", "max_agents");
    let text = m.encode();
    assert!(text.contains("# TYPE callbackd_store_call_duration_seconds histogram"));
    assert_eq!(
        line(
            &text,
            r#"callbackd_store_call_duration_seconds_count{namespace="default",call="runEvents.append",outcome="ok"}"#
        ),
        Some(
            r#"callbackd_store_call_duration_seconds_count{namespace="default",call="runEvents.append",outcome="ok"} 2"#
        )
    );
    // 80 µs falls in the 100 µs bucket, 3 ms does not.
    assert!(text.contains(
        r#"callbackd_store_call_duration_seconds_bucket{namespace="default",call="runEvents.append",outcome="ok",le="0.0001"} 1"#
    ), "{text}");
    assert!(text.contains(
        r#"callbackd_store_call_duration_seconds_count{namespace="a",call="agents.get",outcome="invalid_argument"} 1"#
    ));
    assert!(
        text.contains(r#"callbackd_quota_refusals_total{namespace="a",quota="max_agents"} 1"#),
        "{text}"
    );
    assert!(text
        .contains(r#"callbackd_tool_call_duration_seconds_count{namespace="default",tool="echo",outcome="ok"} 1"#));
}

#[tokio::test]
async fn appends_are_counted_even_past_the_notice_buffer() {
    let (tx, rx) = broadcast::channel(4);
    let m = Metrics::new(
        rx,
        || StoreSizes {
            database_bytes: 4096,
            wal_bytes: 0,
        },
        None,
    );
    let notice = |seq| {
        StoreNotice::Appended(crate::store::EventAppended {
            ns: Namespace::default(),
            run_id: "r".into(),
            seq,
        })
    };
    for seq in 1..=10 {
        tx.send(notice(seq)).unwrap();
    }
    let text = m.encode();
    assert!(
        text.contains("callbackd_events_appended_total 10\n"),
        "{text}"
    );
    tx.send(notice(11)).unwrap();
    assert!(m.encode().contains("callbackd_events_appended_total 11\n"));
    assert!(
        text.contains("callbackd_database_size_bytes 4096\n"),
        "{text}"
    );
    assert!(text.contains("callbackd_wal_size_bytes 0\n"), "{text}");
}

#[test]
fn namespace_usage_is_a_gauge_per_namespace() {
    let m = Metrics::default();
    assert!(
        !m.encode().contains("namespace_agents"),
        "no series before a reading"
    );
    let usage = |ns: &str, agents, bytes| crate::store::records::NamespaceUsage {
        namespace: ns.into(),
        agents,
        stored_bytes: bytes,
        ..Default::default()
    };
    m.set_usage(vec![usage("a", 3, 4096), usage("b", 0, 10)]);
    let text = m.encode();
    assert!(
        text.contains("# TYPE callbackd_namespace_agents gauge"),
        "{text}"
    );
    assert!(
        text.contains("callbackd_namespace_agents{namespace=\"a\"} 3\n"),
        "{text}"
    );
    assert!(
        text.contains("callbackd_namespace_stored_bytes{namespace=\"a\"} 4096\n"),
        "{text}"
    );
    assert!(
        text.contains("callbackd_namespace_stored_bytes{namespace=\"b\"} 10\n"),
        "{text}"
    );
}

#[test]
fn runs_are_counted_by_status_with_their_duration_and_tool_calls_by_outcome() {
    let m = Metrics::default();
    m.run_started("a", "r1");
    m.run_started("a", "r2");
    m.run_ended("a", "r1", "finished");
    m.run_ended("a", "r2", "error");
    // A run whose start this daemon never saw (it restarted): counted, no duration.
    m.run_ended("a", "r3", "finished");
    m.tool_call("a", "echo", "ok", Duration::from_millis(3));
    m.tool_call("a", "echo", "ok", Duration::from_millis(3));
    m.tool_call("a", "echo", "failed", Duration::from_millis(3));
    let text = m.encode();
    for line in [
        "callbackd_runs_total{namespace=\"a\",status=\"finished\"} 2\n",
        "callbackd_runs_total{namespace=\"a\",status=\"error\"} 1\n",
        "callbackd_run_duration_seconds_count{namespace=\"a\"} 2\n",
        "callbackd_tool_calls_total{namespace=\"a\",tool=\"echo\",outcome=\"ok\"} 2\n",
        "callbackd_tool_calls_total{namespace=\"a\",tool=\"echo\",outcome=\"failed\"} 1\n",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[test]
fn stream_gauges_follow_the_guards() {
    let m = Metrics::default();
    let a = m.stream_guard();
    let _b = m.stream_guard();
    m.follower_started();
    m.retention_removed(3);
    drop(a);
    let text = m.encode();
    assert!(text.contains("callbackd_streams_open 1\n"), "{text}");
    assert!(text.contains("callbackd_stream_followers 1\n"));
    assert!(text.contains("callbackd_retention_removed_total 3\n"));
}
