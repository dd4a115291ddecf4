use super::*;

fn error(text: &str) -> String {
    ConfigFile::parse(text).unwrap_err().to_string()
}

const API: &str =
    "[[policy]]\nname = \"api\"\nlimits = [{ algorithm = \"gcra\", rate = \"5/1s\" }]\n";

#[test]
fn a_policy_may_have_a_penalty_box() {
    let boxed = format!("allow_no_rules = true\n{API}penalty = \"15m\"\n");
    let file = ConfigFile::parse(&boxed).unwrap();
    assert_eq!(
        file.policies()[0].penalty_box(),
        Some(std::time::Duration::from_secs(900))
    );
    let bad = format!("{API}penalty = \"soon\"\n");
    assert!(error(&bad).starts_with("line 4: policy.penalty:"));
}

#[test]
fn hostile_files_are_errors_with_lines() {
    assert!(error("[[policy]\n").starts_with("line 1: toml:"));
    assert!(error("bogus = 1\n").starts_with("line 1: toml:"));
    let bad_alg = API.replace("gcra", "leaky");
    assert!(error(&bad_alg).starts_with("line 3: policy.limits.algorithm: unknown algorithm"));
    let bad_rate = API.replace("5/1s", "0/1s");
    assert!(error(&bad_rate).starts_with("line 3: policy.limits.rate:"));
    let no_limits = "[[policy]]\nname = \"api\"\nlimits = []\n";
    assert_eq!(
        error(no_limits),
        "line 3: policy.limits: policy `api` has no limits"
    );
    let twice = format!("{API}{API}");
    assert_eq!(
        error(&twice),
        "line 5: policy.name: a second policy named `api`"
    );
    let bad_name = API.replace("\"api\"", "\"a pi\"");
    assert!(error(&bad_name).starts_with("line 2: policy.name: invalid policy name"));
    let unknown = format!("{API}[[route]]\nroute = \"/x\"\npolicy = \"nope\"\nkey = \"ip\"\n");
    assert_eq!(
        error(&unknown),
        "line 6: route.policy: no policy named `nope`"
    );
    let bad_key = format!("{API}[[route]]\nroute = \"/x\"\npolicy = \"api\"\nkey = \"cookie\"\n");
    assert!(error(&bad_key).starts_with("line 7: route.key: invalid key spec `cookie`"));
    let bad_route = format!("{API}[[route]]\nroute = \"x\"\npolicy = \"api\"\nkey = \"ip\"\n");
    assert!(error(&bad_route).starts_with("line 5: route.route: invalid route"));
    let bad_limit_key = API.replace("\"5/1s\" }", "\"5/1s\", key = \"cookie\" }");
    assert!(error(&bad_limit_key).starts_with("line 3: policy.limits.key: invalid key spec"));
    let bad_shadow =
        format!("{API}[default]\npolicy = \"api\"\nkey = \"ip\"\nshadow = \"maybe\"\n");
    assert_eq!(
        error(&bad_shadow),
        "line 7: default.shadow: `maybe`: expected off, on or on-with-headers"
    );
    let bad_proxy = format!("[client_ip]\ntrusted_proxies = [\"proxy.internal\"]\n{API}");
    assert!(error(&bad_proxy).starts_with("line 2: client_ip.trusted_proxies: "));
    let bad_prefix = format!("[client_ip]\ntrusted_proxies = []\nipv6_prefix = 200\n{API}");
    assert!(error(&bad_prefix).starts_with("line 3: client_ip.ipv6_prefix: "));
    let huge = API.replace("5/1s", "99999999999999999999999/1s");
    assert!(error(&huge).starts_with("line 3: policy.limits.rate:"));
}

#[test]
fn a_file_without_rules_must_say_so() {
    let policies_only = API.to_owned();
    for text in [
        "",
        "\n# nothing yet\n",
        &policies_only,
        "allow_no_rules = false\n",
    ] {
        assert_eq!(
            ConfigFile::parse(text).unwrap_err(),
            ConfigError::NoRules,
            "{text:?}"
        );
    }
    let meant = format!("allow_no_rules = true\n{API}");
    assert!(ConfigFile::parse(&meant).unwrap().rules().is_empty());
    assert!(error("allow_no_rules = \"yes\"\n").starts_with("line 1: toml:"));
}

#[test]
fn a_valid_file() {
    let text = format!(
        "{API}[[route]]\nroute = \"POST /x\"\npolicy = \"api\"\nkey = \"route+ip\"\n[default]\npolicy = \"api\"\nkey = \"global\"\n"
    );
    let file = ConfigFile::parse(&text).unwrap();
    assert_eq!(file.routes.len(), 1);
    assert!(file.default.is_some());
    let shadowed = format!(
        "[client_ip]\ntrusted_proxies = [\"10.0.0.0/8\"]\nipv6_prefix = 56\n{API}[default]\npolicy = \"api\"\nkey = \"ip\"\nshadow = \"on-with-headers\"\n"
    );
    let file = ConfigFile::parse(&shadowed).unwrap();
    let debug = format!("{:?}", file.default.unwrap());
    assert!(debug.contains("shadow: Some(OnWithHeaders)"), "{debug}");
}

#[test]
fn a_limit_may_follow_a_calendar() {
    let text = r#"allow_no_rules = true
[[policy]]
name = "tokens"
limits = [
  { algorithm = "fixed-window", rate = "5000000/month", calendar = { time_zone = "Europe/Berlin", anchor = "15T00:00" } },
  { algorithm = "calendar", rate = "200000/day", calendar = {} },
]
"#;
    let file = ConfigFile::parse(text).unwrap();
    let limits = file.policies()[0].limits();
    let month = crate::calendar::Calendar::month()
        .on_day(15)
        .in_zone("Europe/Berlin")
        .unwrap();
    assert_eq!(limits[0], crate::Limit::calendar(5_000_000, month).unwrap());
    assert_eq!(
        limits[1].to_string(),
        "calendar 200000/day (00:00 UTC)",
        "UTC and midnight unless told"
    );
}

#[test]
fn a_calendar_on_anything_but_a_fixed_window_is_an_error() {
    let limit = |l: &str| format!("[[policy]]\nname = \"p\"\nlimits = [{l}]\n");
    let sliding = limit(
        r#"{ algorithm = "sliding-window", rate = "5/day", calendar = { time_zone = "UTC" } }"#,
    );
    assert!(
        error(&sliding)
            .starts_with("line 3: policy.limits.calendar: only fixed windows follow a calendar"),
        "{}",
        error(&sliding)
    );
    let no_calendar = limit(r#"{ algorithm = "calendar", rate = "5/day" }"#);
    assert!(
        error(&no_calendar).starts_with("line 3: policy.limits.algorithm: a calendar window needs")
    );
    let period = limit(r#"{ algorithm = "fixed-window", rate = "5/30d", calendar = {} }"#);
    assert!(error(&period).contains("N/day, N/week, N/month or N/year"));
    let zone = limit(
        r#"{ algorithm = "fixed-window", rate = "5/month", calendar = { time_zone = "Europe/Berlim" } }"#,
    );
    assert!(
        error(&zone).contains("`Europe/Berlim` is not a time zone"),
        "{}",
        error(&zone)
    );
    let anchor =
        limit(r#"{ algorithm = "fixed-window", rate = "5/month", calendar = { anchor = "32" } }"#);
    assert!(
        error(&anchor).contains("invalid calendar"),
        "{}",
        error(&anchor)
    );
    let unknown =
        limit(r#"{ algorithm = "fixed-window", rate = "5/month", calendar = { zone = "UTC" } }"#);
    assert!(
        error(&unknown).contains("unknown field `zone`"),
        "{}",
        error(&unknown)
    );
}
