//! `[[webhooks]]`'s checks: each refusal names the key to fix.

use super::*;

const GOOD: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn entry(url: &str, secret: &str) -> WebhookConfig {
    WebhookConfig {
        url: url.into(),
        secret: Some(Secret::new(secret.into())),
        ..WebhookConfig::default()
    }
}

#[test]
fn a_good_entry_passes_and_its_key_is_the_decoded_secret() {
    let e = entry("http://127.0.0.1:9/x", GOOD);
    e.validate(0).unwrap();
    assert_eq!(e.signing_key(0, &|_| None).unwrap().len(), 24);
}

#[test]
fn bad_secrets_and_urls_are_refused_naming_the_key() {
    for bad in [
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_!!!",
        "whsec_c2hvcnQ=",
    ] {
        let err = entry("http://h/x", bad)
            .validate(2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("webhooks[2].secret"), "{bad}: {err}");
    }
    for bad in ["", "ftp://h/x", "https://h/x", "not a url", "http:///x"] {
        let err = entry(bad, GOOD).validate(0).unwrap_err().to_string();
        assert!(err.contains("webhooks[0].url"), "{bad}: {err}");
    }
    let mut e = entry("http://h/x", GOOD);
    e.events = Some(vec!["run.started".into()]);
    let err = e.validate(0).unwrap_err().to_string();
    assert!(
        err.contains("webhooks[0].events") && err.contains("run.started"),
        "{err}"
    );
}

#[test]
fn a_secret_from_the_environment_is_checked_under_its_key() {
    let e = WebhookConfig {
        url: "http://h/x".into(),
        secret_env: Some("HOOK".into()),
        ..WebhookConfig::default()
    };
    e.validate(0).unwrap();
    let err = e.signing_key(0, &|_| Some("nope".into())).unwrap_err();
    assert!(err.to_string().contains("webhooks[0].secret_env"), "{err}");
    assert!(e.signing_key(0, &|_| Some(GOOD.into())).is_ok());
}

#[test]
fn filters_choose_events_and_namespaces() {
    let mut e = entry("http://h/x", GOOD);
    assert!(e.wants("run.ended", "default"));
    e.events = Some(vec!["approval.required".into()]);
    e.namespaces = Some(vec!["team-a".into()]);
    assert!(e.wants("approval.required", "team-a"));
    assert!(!e.wants("run.ended", "team-a"));
    assert!(!e.wants("approval.required", "default"));
}
