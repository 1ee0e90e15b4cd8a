//! `[telemetry]` resolved against files and a fake environment.

use super::*;

fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn off_by_default_even_with_the_standard_variables_set() {
    let c = TelemetryConfig::default();
    let e = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")]);
    assert!(c.resolve(&e).unwrap().is_none());
}

#[test]
fn the_endpoint_comes_from_the_file_then_the_standard_variables() {
    let on = TelemetryConfig {
        enabled: true,
        ..Default::default()
    };
    let none = env(&[]);
    assert_eq!(
        on.resolve(&none).unwrap().unwrap().endpoint,
        "http://localhost:4318/v1/traces"
    );
    let base = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:6006/")]);
    assert_eq!(
        on.resolve(&base).unwrap().unwrap().endpoint,
        "http://127.0.0.1:6006/v1/traces"
    );
    let whole = env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:6006"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/x"),
    ]);
    assert_eq!(
        on.resolve(&whole).unwrap().unwrap().endpoint,
        "http://127.0.0.1:9/x"
    );
    let file = TelemetryConfig {
        otlp_endpoint: Some("http://127.0.0.1:7/v1/traces".into()),
        ..Default::default()
    };
    assert_eq!(
        file.resolve(&whole).unwrap().unwrap().endpoint,
        "http://127.0.0.1:7/v1/traces"
    );
    let disabled = env(&[("OTEL_SDK_DISABLED", "true")]);
    assert!(file.resolve(&disabled).unwrap().is_none());
}

#[test]
fn headers_from_the_file_a_file_and_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "from-file\n").unwrap();
    let c = TelemetryConfig {
        enabled: true,
        headers: [(
            "Authorization".to_string(),
            Secret::new("Bearer a b".into()),
        )]
        .into(),
        headers_file: [("api_key".to_string(), key)].into(),
        headers_env: [("x-team".to_string(), "TEAM".to_string())].into(),
        ..Default::default()
    };
    let e = env(&[
        ("TEAM", "blue"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=lost,x-other=a%20b",
        ),
    ]);
    let h = c.resolve(&e).unwrap().unwrap().headers;
    let got: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.expose())).collect();
    assert_eq!(
        got,
        [
            ("api_key", "from-file"),
            ("authorization", "Bearer a b"),
            ("x-other", "a b"),
            ("x-team", "blue")
        ]
    );
}

#[test]
fn a_malformed_header_is_an_error_naming_its_key() {
    let bad_value = TelemetryConfig {
        enabled: true,
        headers: [("api_key".to_string(), Secret::new("a\nb".into()))].into(),
        ..Default::default()
    };
    let e = bad_value.validate().unwrap_err().to_string();
    assert!(e.contains("telemetry.headers.api_key"), "{e}");
    let bad_name = TelemetryConfig {
        enabled: true,
        headers: [("api key".to_string(), Secret::new("x".into()))].into(),
        ..Default::default()
    };
    let e = bad_name.validate().unwrap_err().to_string();
    assert!(e.contains("telemetry.headers.api key"), "{e}");
    let on = TelemetryConfig {
        enabled: true,
        ..Default::default()
    };
    let e = on
        .resolve(&env(&[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "secret-without-equals",
        )]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{e}");
    assert!(!e.contains("secret-without-equals"), "{e}");
    let e = on
        .resolve(&env(&[("OTEL_EXPORTER_OTLP_HEADERS", "k=%zz")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("percent-encoding"), "{e}");
    let missing = TelemetryConfig {
        enabled: true,
        headers_env: [("api_key".to_string(), "NOPE".to_string())].into(),
        ..Default::default()
    };
    let e = missing.resolve(&env(&[])).unwrap_err().to_string();
    assert!(e.contains("telemetry.headers_env.api_key"), "{e}");
}

#[test]
fn bad_ratio_and_endpoint_are_refused() {
    let c = TelemetryConfig {
        sampling_ratio: 1.5,
        ..Default::default()
    };
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("sampling_ratio"));
    let c = TelemetryConfig {
        otlp_endpoint: Some("https://collector.example:4318".into()),
        ..Default::default()
    };
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("telemetry.otlp_endpoint"));
}
