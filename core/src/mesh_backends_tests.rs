use super::*;

fn mesh(yaml: &str) -> MeshSpec {
    let v = crate::codec::decode_one(yaml.as_bytes(), crate::codec::Limits::default()).unwrap();
    serde_json::from_value(v).unwrap()
}

fn violations(err: ValidationError) -> Vec<(String, String)> {
    err.violations
        .into_iter()
        .map(|v| (v.field, v.message))
        .collect()
}

fn v(field: &str, message: &str) -> (String, String) {
    (field.to_owned(), message.to_owned())
}

fn validate(yaml: &str) -> Vec<(String, String)> {
    violations(mesh(yaml).validate())
}

/// Kuma 2.7.29 `pkg/core/resources/apis/mesh/mesh_validator_test.go`: the logging, tracing and
/// zone egress entries, with Kuma's paths (`config`) and messages.
#[test]
fn logging_and_tracing_backends_follow_kuma() {
    let logging = |backends: &str, default: &str| {
        validate(&format!(
            "logging:\n  defaultBackend: {default}\n  backends:\n{backends}"
        ))
    };
    assert_eq!(
        logging(
            "  - name: backend-1\n    type: tcp\n    conf:\n      address:\n",
            "backend-1"
        ),
        [v("logging.backends[0].config.address", "cannot be empty")]
    );
    assert_eq!(
        logging(
            "  - name: backend-1\n    type: tcp\n    conf:\n      address: wrong-format:234:234\n",
            "backend-1"
        ),
        [v(
            "logging.backends[0].config.address",
            "has to be in format of HOST:PORT"
        )]
    );
    assert_eq!(
        logging(
            "  - name: backend-1\n    type: file\n    conf:\n      path:\n",
            "backend-1"
        ),
        [v("logging.backends[0].config.path", "cannot be empty")]
    );
    assert_eq!(
        logging(
            "  - name: backend-1\n    type: file\n    conf:\n      path: /path\n",
            "non-existing-backend"
        ),
        [v(
            "logging.defaultBackend",
            "has to be set to one of the logging backend in mesh"
        )]
    );
    // Issue 41: compose container names and bracketed IPv6 are HOST:PORT to Go.
    for ok in [
        "kuma-3_logstash_1:5000",
        "logstash:5000",
        "[::1]:5000",
        "127.0.0.1:5000",
    ] {
        assert_eq!(
            logging(
                &format!("  - name: l\n    type: tcp\n    conf:\n      address: '{ok}'\n"),
                "l"
            ),
            [],
            "{ok}"
        );
    }
    for bad in [":5000", "logstash:", "logstash", "::1:5000"] {
        assert_eq!(
            logging(
                &format!("  - name: l\n    type: tcp\n    conf:\n      address: '{bad}'\n"),
                "l"
            ),
            [v(
                "logging.backends[0].config.address",
                "has to be in format of HOST:PORT"
            )],
            "{bad}"
        );
    }
    // "mesh with many errors" (the logging part).
    assert_eq!(
        logging("  - name:\n    type: file\n    conf: {path: /tmp}\n  - name: file-1\n    type: file\n  - name: file-1\n    type: tcp\n", "unknown"),
        [
            v("logging.backends[0].name", "cannot be empty"),
            v("logging.backends[1].config.path", "cannot be empty"),
            v("logging.backends[2].config.address", "cannot be empty"),
            v("logging.backends[2].name", "\"file-1\" name is already used for another backend"),
            v("logging.defaultBackend", "has to be set to one of the logging backend in mesh"),
        ]
    );

    let zipkin = |conf: &str| {
        validate(&format!(
            "tracing:\n  backends:\n  - name: zipkin-us\n    type: zipkin\n    conf: {conf}\n"
        ))
    };
    assert_eq!(zipkin("{url: 'http://zipkin.local:9411/v2/spans'}"), []);
    assert_eq!(
        zipkin("{url: 'http://kuma-3_zipkin_1:9411/api/v2/spans'}"),
        []
    );
    assert_eq!(
        zipkin("{url: ''}"),
        [v("tracing.backends[0].config.url", "cannot be empty")]
    );
    assert_eq!(
        zipkin("{url: invalid-url}"),
        [v("tracing.backends[0].config.url", "invalid URL")]
    );
    assert_eq!(
        zipkin("{url: 'http://zipkin-us.local/v2/spans'}"),
        [v(
            "tracing.backends[0].config.url",
            "port has to be explicitly specified"
        )]
    );
    assert_eq!(
        zipkin("{url: 'http://zipkin-us.local:9411/v2/spans', apiVersion: invalid}"),
        [v(
            "tracing.backends[0].config.apiVersion",
            "has invalid value. Allowed values: httpJsonV1, httpJson, httpProto"
        )]
    );
    assert_eq!(
        validate("tracing:\n  backends:\n  - name: zipkin-us\n    sampling: 100.1\n    type: zipkin\n    conf: {url: 'http://zipkin-us.local:9411/v2/spans'}\n"),
        [v("tracing.backends[0].sampling", "has to be in [0.0 - 100.0] range")]
    );
    assert_eq!(
        validate("tracing:\n  defaultBackend: other\n  backends:\n  - name: dd\n    type: datadog\n    conf: {address: '', port: 0}\n  - name: dd\n    type: jaeger\n"),
        [
            v("tracing.backends[0].config.address", "cannot be empty"),
            v("tracing.backends[0].config.port", "port must be in the range [1, 65535]"),
            v("tracing.backends[1].type", "unknown backend type. Available backends: \"zipkin\", \"datadog\""),
            v("tracing.backends[1].name", "\"dd\" name is already used for another backend"),
            v("tracing.defaultBackend", "has to be set to one of the tracing backend in mesh"),
        ]
    );
    assert_eq!(
        validate("tracing:\n  backends:\n  - name: dd\n    type: datadog\n    conf: {address: datadog_agent, port: 8126}\n"),
        []
    );
    assert_eq!(
        validate("logging:\n  backends:\n  - name: x\n    type: syslog\n"),
        [v(
            "logging.backends[0].type",
            "unknown backend type. Available backends: \"tcp\", \"file\""
        )]
    );
    assert_eq!(
        validate("routing:\n  zoneEgress: true\n"),
        [v("mtls", "has to be set when zoneEgress enabled")]
    );
    assert_eq!(
        validate("routing:\n  zoneEgress: true\nmtls:\n  enabledBackend: ca-1\n  backends:\n  - {name: ca-1, type: builtin}\n"),
        []
    );
}

const PROVIDED: &str = "mtls:\n  enabledBackend: ca-1\n  backends:\n  - name: ca-1\n    type: provided\n    conf: CONF\n";

fn ca(conf: &str, exists: &[&str]) -> Vec<(String, String)> {
    let m = mesh(&PROVIDED.replace("CONF", conf));
    violations(m.validate_ca_backends("default", |s| exists.contains(&s)))
}

/// Kuma 2.7.29 `pkg/plugins/ca/provided/manager_test.go` "should Validate invalid config"
/// (the data source entries; the CA-parsing one is not run by Umbra), then the Secrets the
/// sources name (issue 41): Kuma's data source loader loads the key, then the cert, and a
/// failure is reported at both fields.
#[test]
fn provided_ca_sources_and_secrets_follow_kuma() {
    let at = |f: &str| format!("mtls.backends[0].conf.{f}");
    assert_eq!(
        ca("{}", &[]),
        [
            v(&at("cert"), "has to be defined"),
            v(&at("key"), "has to be defined")
        ]
    );
    let unset = "data source has to be chosen. Available sources: secret, file, inline";
    assert_eq!(
        ca("{cert: {}, key: {}}", &[]),
        [v(&at("cert"), unset), v(&at("key"), unset)]
    );
    assert_eq!(
        ca("{cert: {secret: null}, key: {secret: null}}", &[]),
        [v(&at("cert"), unset), v(&at("key"), unset)]
    );
    assert_eq!(
        ca("{cert: {secret: ''}, key: {inline: ''}}", &[]),
        [
            v(&at("cert.secret"), "cannot be empty"),
            v(&at("key.inline"), "cannot be empty")
        ]
    );
    assert_eq!(
        ca("{cert: {file: ''}, key: {inlineString: ''}}", &[]),
        [v(&at("cert.file"), "cannot be empty")]
    );
    // Only Secret references are looked up.
    assert_eq!(
        ca("{cert: {inline: dGVzdA==}, key: {inlineString: x}}", &[]),
        []
    );
    assert_eq!(ca("{cert: {file: /ca.pem}, key: {file: /ca.key}}", &[]), []);
    assert_eq!(
        ca(
            "{cert: {secret: ca-cert}, key: {secret: ca-key}}",
            &["ca-cert", "ca-key"]
        ),
        []
    );
    let missing = |name: &str| {
        format!("could not load data: Resource not found: type=\"Secret\" name=\"{name}\" mesh=\"default\"")
    };
    assert_eq!(
        ca("{cert: {secret: ca-cert}, key: {secret: ca-key}}", &[]),
        [
            v(&at("cert"), &missing("ca-key")),
            v(&at("key"), &missing("ca-key"))
        ]
    );
    assert_eq!(
        ca(
            "{cert: {secret: ca-cert}, key: {secret: ca-key}}",
            &["ca-key"]
        ),
        [
            v(&at("cert"), &missing("ca-cert")),
            v(&at("key"), &missing("ca-cert"))
        ]
    );
    assert_eq!(
        ca("{cert: {secret: ca-cert}, key: {inline: dGVzdA==}}", &[]),
        [
            v(&at("cert"), &missing("ca-cert")),
            v(&at("key"), &missing("ca-cert"))
        ]
    );
    // Kuma's proto decoding refuses two sources at once and a source that is not a mapping.
    assert_eq!(
        ca(
            "{cert: {secret: a, file: /b}, key: {secret: c}}",
            &["a", "c"]
        )
        .len(),
        1
    );
    assert_eq!(
        ca("{cert: a, key: {secret: c}}", &["c"])[0].0,
        "mtls.backends[0].conf"
    );
    // `skipValidation` skips it all, as Kuma's mesh manager does.
    let skip = mesh(
        &PROVIDED
            .replace("CONF", "{cert: {secret: gone}, key: {secret: gone}}")
            .replace("mtls:\n", "mtls:\n  skipValidation: true\n"),
    );
    assert!(!skip
        .validate_ca_backends("default", |_| false)
        .has_violations());
    assert!(skip.provided_ca_secrets().is_empty());
    let m = mesh(&PROVIDED.replace("CONF", "{cert: {secret: c}, key: {secret: k}}"));
    assert_eq!(m.provided_ca_secrets(), ["c", "k"]);
    assert_eq!(m.backends_using_secret("k"), ["ca-1"]);
    assert!(m.backends_using_secret("other").is_empty());
    assert_eq!(skip.backends_using_secret("gone"), ["ca-1"]);
}

/// Kuma 2.7.29 `pkg/plugins/ca/builtin/manager.go` `ValidateBackend`: the Secret name
/// `<mesh>.ca-builtin-cert-<backend>` must be a lowercase DNS name.
#[test]
fn builtin_ca_backend_names_follow_kuma() {
    let builtin = |mesh_name: &str, backend: &str| {
        let m = mesh(&format!(
            "mtls:\n  backends:\n  - name: '{backend}'\n    type: builtin\n"
        ));
        violations(m.validate_ca_backends(mesh_name, |_| true))
    };
    assert_eq!(builtin("default", "ca-1"), []);
    assert_eq!(builtin("default", "ca_1"), []);
    let at = "mtls.backends[0].conf.mtls.backends.name";
    assert_eq!(
        builtin("default", "CA-1"),
        [v(at, "\"CA-1\" name must be valid dns name")]
    );
    assert_eq!(
        builtin("default", "ca 1"),
        [v(at, "\"ca 1\" name must be valid dns name")]
    );
    assert_eq!(
        builtin("default", &"a".repeat(250)),
        [
            v(at, "Backend name is too long. Max length: 255"),
            v(
                at,
                &format!("{:?} name must be valid dns name", "a".repeat(250))
            ),
        ]
    );
}
