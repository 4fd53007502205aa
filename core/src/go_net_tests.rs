use super::*;

/// govalidator a9d515a09cc2, `validator_test.go` `TestIsURL`, every row.
#[test]
fn is_url_as_govalidator_tests_it() {
    let cases = [
        ("", false),
        ("http://foo.bar#com", true),
        ("http://foobar.com", true),
        ("https://foobar.com", true),
        ("foobar.com", true),
        ("http://foobar.coffee/", true),
        ("http://foobar.中文网/", true),
        ("http://foobar.org/", true),
        ("http://foobar.ORG", true),
        ("http://foobar.org:8080/", true),
        ("ftp://foobar.ru/", true),
        ("ftp.foo.bar", true),
        ("http://user:pass@www.foobar.com/", true),
        ("http://user:pass@www.foobar.com/path/file", true),
        ("http://127.0.0.1/", true),
        ("http://duckduckgo.com/?q=%2F", true),
        ("http://localhost:3000/", true),
        ("http://foobar.com/?foo=bar#baz=qux", true),
        ("http://foobar.com?foo=bar", true),
        ("http://www.xn--froschgrn-x9a.net/", true),
        ("http://foobar.com/a-", true),
        ("http://foobar.پاکستان/", true),
        ("http://foobar.c_o_m", false),
        ("http://_foobar.com", false),
        ("http://foo_bar.com", true),
        ("http://user:pass@foo_bar_bar.bar_foo.com", true),
        ("xyz://foobar.com", false),
        (".com", false),
        ("rtmp://foobar.com", false),
        ("http://foobar.com#baz=qux", true),
        ("http://foobar.com/t$-_.+!*\\'(),", true),
        ("http://www.foobar.com/~foobar", true),
        ("http://www.-foobar.com/", false),
        ("http://www.foo---bar.com/", false),
        ("http://r6---snnvoxuioq6.googlevideo.com", true),
        ("mailto:someone@example.com", true),
        ("irc://irc.server.org/channel", false),
        ("irc://#channel@network", true),
        ("/abs/test/dir", false),
        ("./rel/test/dir", false),
        ("http://foo^bar.org", false),
        ("http://foo&*bar.org", false),
        ("http://foo&bar.org", false),
        ("http://foo bar.org", false),
        ("http://foo.bar.org", true),
        ("http://www.foo.bar.org", true),
        ("http://www.foo.co.uk", true),
        ("foo", false),
        ("http://.foo.com", false),
        ("http://,foo.com", false),
        (",foo.com", false),
        ("http://myservice.:9093/", true),
        (
            "https://pbs.twimg.com/profile_images/560826135676588032/j8fWrmYY_normal.jpeg",
            true,
        ),
        ("http://prometheus-alertmanager.service.q:9093", true),
        ("aio1_alertmanager_container-63376c45:9093", true),
        (
            "https://www.logn-123-123.url.with.sigle.letter.d:12345/url/path/foo?bar=zzz#user",
            true,
        ),
        ("http://me.example.com", true),
        ("http://www.me.example.com", true),
        ("https://farm6.static.flickr.com", true),
        (
            "https://zh.wikipedia.org/wiki/Wikipedia:%E9%A6%96%E9%A1%B5",
            true,
        ),
        ("google", false),
        ("http://hyphenated-host-name.example.co.in", true),
        ("http://cant-end-with-hyphen-.example.com", false),
        ("http://-cant-start-with-hyphen.example.com", false),
        ("http://www.domain-can-have-dashes.com", true),
        ("http://m.abcd.com/test.html", true),
        ("http://m.abcd.com/a/b/c/d/test.html?args=a&b=c", true),
        ("http://[::1]:9093", true),
        ("http://[::1]:909388", false),
        ("1200::AB00:1234::2552:7777:1313", false),
        ("http://[2001:db8:a0b:12f0::1]/index.html", true),
        ("http://[1200:0000:AB00:1234:0000:2552:7777:1313]", true),
        ("http://user:pass@[::1]:9093/a/b/c/?a=v#abc", true),
        ("https://127.0.0.1/a/b/c?a=v&c=11d", true),
        ("https://foo_bar.example.com", true),
        ("http://foo_bar.example.com", true),
        ("http://foo_bar_fizz_buzz.example.com", true),
        ("http://_cant_start_with_underescore", false),
        ("http://cant_end_with_underescore_", false),
        ("foo_bar.example.com", true),
        ("foo_bar_fizz_buzz.example.com", true),
        ("http://hello_world.example.com", true),
        ("foo_bar-fizz-buzz:1313", true),
        ("foo_bar-fizz-buzz:13:13", false),
        ("foo_bar-fizz-buzz://1313", false),
    ];
    for (s, want) in cases {
        assert_eq!(is_url(s), want, "IsURL({s:?})");
    }
}

/// Issue 41: the compose container names Kuma's e2e tests log to, and the addresses of
/// Kuma's MeshAccessLog docs and validator tests.
#[test]
fn is_url_takes_container_names_and_kuma_doc_addresses() {
    for ok in [
        "kuma-3_meshaccesslog_tcp-sink:9999",
        "kuma_tcp-sink_12:9999",
        "127.0.0.1:5000",
        "logstash:1234",
        "tcp://logging.example.com:5000",
        "[::1]:5000",
        "otel-collector.observability.svc:4317",
    ] {
        assert!(is_url(ok), "{ok}");
    }
    for bad in [
        "not_valid_url",
        // govalidator's regex wants two characters after a host's last `_`: Kuma refuses it.
        "kuma_tcp-sink_1:9999",
        "_sink:9999",
        "sink:99999x",
        "a:b:c",
        "sink :9999",
        "",
        "abc",
    ] {
        assert!(!is_url(bad), "{bad}");
    }
}

/// govalidator a9d515a09cc2, `TestIsDNSName` and `TestIsHost`, every row.
#[test]
fn dns_names_and_hosts_as_govalidator_tests_them() {
    let long = "www.jubfvq1v3p38i51622y0dvmdk1mymowjyeu26gbtw9andgynj1gg8z3msb1kl5z6906k846pj3sulm4kiyk82ln5teqj9nsht59opr0cs5ssltx78lfyvml19lfq1wp4usbl0o36cmiykch1vywbttcus1p9yu0669h8fj4ll7a6bmop505908s1m83q2ec2qr9nbvql2589adma3xsq2o38os2z3dmfh2tth4is4ixyfasasasefqwe4t2ub2fz1rme.de";
    let dns = [
        ("localhost", true),
        ("a.bc", true),
        ("a.b.", true),
        ("a.b..", false),
        ("localhost.local", true),
        ("localhost.localdomain.intern", true),
        ("l.local.intern", true),
        ("ru.link.n.svpncloud.com", true),
        ("-localhost", false),
        ("localhost.-localdomain", false),
        ("localhost.localdomain.-int", false),
        ("_localhost", true),
        ("localhost._localdomain", true),
        ("localhost.localdomain._int", true),
        ("lÖcalhost", false),
        ("localhost.lÖcaldomain", false),
        ("localhost.localdomain.üntern", false),
        ("__", true),
        ("localhost/", false),
        ("127.0.0.1", false),
        ("[::1]", false),
        ("50.50.50.50", false),
        ("localhost.localdomain.intern:65535", false),
        ("漢字汉字", false),
        (long, false),
    ];
    for (s, want) in dns {
        assert_eq!(is_dns_name(s), want, "IsDNSName({s:?})");
    }
    let hosts = [
        ("localhost", true),
        ("localhost.localdomain", true),
        ("2001:db8:0000:1:1:1:1:1", true),
        ("::1", true),
        ("play.golang.org", true),
        ("localhost.localdomain.intern:65535", false),
        ("-[::1]", false),
        ("-localhost", false),
        (".localhost", false),
        // Issue 41: container names with underscores.
        ("kuma-3_meshaccesslog_tcp-sink", true),
        ("web_1", true),
    ];
    for (s, want) in hosts {
        assert_eq!(is_host(s), want, "IsHost({s:?})");
    }
}

/// Go's `net.ParseIP` (`TestParseIP`'s shapes): no leading zeros, no zone, IPv4 tails.
#[test]
fn ips_as_go_parses_them() {
    for ok in [
        "127.0.1.2",
        "::ffff:127.1.2.3",
        "2001:4860:0:2001::68",
        "::",
        "0.0.0.0",
    ] {
        assert!(is_ip(ok), "{ok}");
    }
    for bad in [
        "127.001.002.003",
        "fe80::1%lo0",
        "1.2.3",
        "256.0.0.1",
        "a.b.c.d",
        "",
    ] {
        assert!(!is_ip(bad), "{bad}");
    }
}

/// Go's `net.SplitHostPort`, the rows of `net`'s `splitJoinTests` and `splitFailureTests`.
#[test]
fn split_host_port_as_go() {
    for (hp, host, port) in [
        ("www.google.com:80", "www.google.com", "80"),
        ("127.0.0.1:1234", "127.0.0.1", "1234"),
        ("[::1]:80", "::1", "80"),
        ("[fe80::1%lo0]:80", "fe80::1%lo0", "80"),
        ("localhost:http", "localhost", "http"),
        (":80", "", "80"),
        ("[]:80", "", "80"),
        ("host:", "host", ""),
    ] {
        assert_eq!(split_host_port(hp), Ok((host, port)), "{hp}");
    }
    for (hp, why) in [
        ("golang.org", "missing port in address"),
        ("127.0.0.1", "missing port in address"),
        ("[::1]", "missing port in address"),
        ("[fe80::1%lo0]", "missing port in address"),
        ("[localhost%lo0]", "missing port in address"),
        ("localhost%lo0", "missing port in address"),
        ("::1", "too many colons in address"),
        ("fe80::1%lo0", "too many colons in address"),
        ("fe80::1%lo0:80", "too many colons in address"),
        ("[foo:bar]", "missing port in address"),
        ("[foo:bar]baz", "missing port in address"),
        ("[foo]bar:baz", "missing port in address"),
        ("[foo]:[bar]:baz", "too many colons in address"),
        ("[foo]:[bar]baz", "unexpected '[' in address"),
        ("foo[bar]:baz", "unexpected '[' in address"),
        ("foo]bar:baz", "unexpected ']' in address"),
    ] {
        assert_eq!(
            split_host_port(hp).map_err(|e| e.to_string()),
            Err(format!("address {hp}: {why}")),
            "{hp}"
        );
    }
}

/// Go 1.26's `url.Parse` and `url.ParseRequestURI` on the shapes Kuma's validators meet.
#[test]
fn urls_as_go_parses_them() {
    let u = parse_url("http://user:pw@host:80/p%20q?x=1#frag").unwrap();
    assert_eq!(
        (u.scheme.as_str(), u.user.as_deref(), u.host.as_str()),
        ("http", Some("user:pw"), "host:80")
    );
    assert_eq!(
        (u.path.as_str(), u.raw_query.as_str(), u.fragment.as_str()),
        ("/p q", "x=1", "frag")
    );
    assert_eq!((u.hostname(), u.port()), ("host", "80"));
    let v6 = parse_url("http://[::1]:9411/api").unwrap();
    assert_eq!((v6.hostname(), v6.port()), ("::1", "9411"));
    assert_eq!(parse_url("HTTP:opaque").unwrap().opaque, "opaque");
    assert_eq!(parse_url("foo.com").unwrap().path, "foo.com");
    for bad in [
        "http://host:8a/",
        "http://[::1",
        "http://[1.2.3.4]/",
        "http://a[::1]/",
        "http://::1:80/",
        "http://host:80:80/",
        "http://ho st/",
        "http://h%zz/",
        "http://%41/",
        ":x",
        "a:b/c:d e\u{7f}",
        // A scheme cannot start with a digit: a relative path with a colon in its first segment.
        "1a:b",
    ] {
        assert!(parse_url(bad).is_err(), "{bad}");
    }
    // Strict colons are for http and https only (go.dev/issue/78077).
    assert_eq!(parse_url("mongodb://a:1,b:2/").unwrap().host, "a:1,b:2");
    assert!(parse_url("mongodb://a:1:2/").is_ok());
    assert_eq!(parse_request_uri("/path").unwrap().path, "/path");
    assert!(parse_request_uri("host:80").unwrap().opaque == "80");
    assert!(parse_request_uri("relative/path").is_err());
    assert!(parse_request_uri("").is_err());
    let r = parse_request_uri("http://h:1/#x").unwrap();
    assert_eq!((r.path.as_str(), r.fragment.as_str()), ("/#x", ""));
}

/// Kubernetes' `IsDNS1123Subdomain` (apimachinery `validation_test.go` `TestIsDNS1123Subdomain`
/// rows): no per-label limit, 253 characters overall.
#[test]
fn dns1123_subdomains_as_kubernetes() {
    for ok in [
        "a",
        "ab",
        "abc",
        "a1",
        "a-1",
        "a--1--2--b",
        "0",
        "01",
        "0-1",
        "a.a",
        "ab.a",
        "1.2.3.4",
        "a.b-c.d",
        &"a".repeat(100),
        &"a".repeat(253),
    ] {
        assert!(dns1123_subdomain_violations(ok).is_empty(), "{ok}");
    }
    for bad in [
        "", "A", "ABC", "aBc", "A1", "_", "a_", "-", "a-", "a.", ".a", "a..b", "a@b", "a,b", "a b",
    ] {
        assert_eq!(dns1123_subdomain_violations(bad).len(), 1, "{bad}");
    }
    assert_eq!(
        dns1123_subdomain_violations(&"a".repeat(254)),
        vec!["must be no more than 253 characters".to_owned()]
    );
}
