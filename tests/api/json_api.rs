//! API tokens and the JSON API: tokens made on the account page, the
//! authorization matrix for tokens, revocation, every bad input, the same
//! numbers as the pages, and every answer checked against the OpenAPI
//! document.

use serde_json::Value;
use tickertape::accounts::Role;
use tickertape::storage::sites;

use crate::helpers::*;
use crate::openapi;

struct World {
    app: TestApp,
    alpha: String,
    charlie: String,
    bravo: String,
}

/// alpha.test and charlie.test belong to a@, bravo.test to b@; alpha has
/// 4,321 views on /secret-page, all from secret.example, that must never
/// reach anyone else.
async fn world() -> World {
    let app = spawn_app().await;
    let a = app.add_user("a@example.com", Role::Owner).await;
    let b = app.add_user("b@example.com", Role::Owner).await;
    app.add_user("admin@example.com", Role::Admin).await;
    let alpha = app.add_site("alpha.test", &[]).await;
    let bravo = app.add_site("bravo.test", &[]).await;
    let charlie = app.add_site("charlie.test", &[]).await;
    for (site, owner) in [(&alpha, a.id), (&bravo, b.id), (&charlie, a.id)] {
        app.set_owners(site, &[owner]).await;
    }
    let hits: Vec<(&str, _, Option<&str>)> = (0..4321)
        .map(|_| ("alpha.test/secret-page", t0(), Some("secret.example")))
        .chain((0..7).map(|_| ("bravo.test/b", t0(), None)))
        .chain((0..3).map(|_| ("charlie.test/c", t0(), None)))
        .collect();
    app.write_hits(&hits).await;
    World {
        alpha: alpha.id.to_string(),
        bravo: bravo.id.to_string(),
        charlie: charlie.id.to_string(),
        app,
    }
}

/// Creates a token on the account page; `sites: None` means all sites.
pub(crate) async fn create_token(login: &Login, name: &str, sites: Option<&[&str]>) -> String {
    create_token_with(login, name, sites, false).await
}

/// A token of all the user's sites that may also manage their email
/// subscribers.
pub(crate) async fn create_email_token(login: &Login, name: &str) -> String {
    create_token_with(login, name, None, true).await
}

async fn create_token_with(
    login: &Login,
    name: &str,
    sites: Option<&[&str]>,
    manage_email: bool,
) -> String {
    let mut form = vec![("csrf", login.csrf.as_str()), ("name", name)];
    if manage_email {
        form.push(("email", "on"));
    }
    match sites {
        None => form.push(("scope", "all")),
        Some(ids) => {
            form.push(("scope", "chosen"));
            form.extend(ids.iter().map(|id| ("site", *id)));
        }
    }
    let r = login.post("/account/tokens", &form).await;
    assert_eq!(r.status(), 200, "token created");
    let page = r.text().await.unwrap();
    let start = page.find("id=\"new-token\">").expect("the token is shown") + 15;
    page[start..start + 71].to_owned()
}

/// A JSON API answer, checked against the OpenAPI document.
pub(crate) struct Answer {
    pub status: u16,
    pub json: Value,
    pub headers: reqwest::header::HeaderMap,
}

async fn call(app: &TestApp, method: &str, token: Option<&str>, path: &str) -> Answer {
    let mut request = app.http.request(
        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
        format!("{}{path}", app.address),
    );
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let content_type = headers
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = r.text().await.unwrap();
    openapi::check(method, path, status, &content_type, &body);
    Answer {
        status,
        json: serde_json::from_str(&body).unwrap(),
        headers,
    }
}

pub(crate) async fn get(app: &TestApp, token: &str, path: &str) -> Answer {
    call(app, "GET", Some(token), path).await
}

fn code(a: &Answer) -> &str {
    a.json["error"]["code"].as_str().unwrap_or("(none)")
}

fn site_paths(id: &str) -> Vec<String> {
    [
        "/series?range=24h",
        "/pages?range=24h",
        "/page/series?path=/secret-page&range=24h",
        "/page/seconds?path=/secret-page&minute=2026-11-22T10:01",
        "/sources?range=24h",
        "/sources?path=/secret-page&range=24h",
        "/breakdown?dimension=source&range=24h",
        "/breakdown?dimension=source&path=/secret-page&range=24h",
        "/visits?range=24h",
        "/visits?path=/secret-page&range=24h",
    ]
    .iter()
    .map(|s| format!("/api/v1/sites/{id}{s}"))
    .collect()
}

#[tokio::test]
async fn tokens_read_only_what_their_scope_and_their_user_allow() {
    let w = world().await;
    let app = &w.app;
    let a = app.login("a@example.com").await;
    let b = app.login("b@example.com").await;
    let admin = app.login("admin@example.com").await;
    let a_all = create_token(&a, "all of a's", None).await;
    let a_charlie = create_token(&a, "charlie only", Some(&[&w.charlie])).await;
    let b_all = create_token(&b, "all of b's", None).await;
    let admin_all = create_token(&admin, "everything", None).await;

    let domains = |a: &Answer| -> Vec<String> {
        a.json["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["domain"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        domains(&get(app, &a_all, "/api/v1/sites").await),
        ["alpha.test", "charlie.test"]
    );
    assert_eq!(
        domains(&get(app, &a_charlie, "/api/v1/sites").await),
        ["charlie.test"]
    );
    assert_eq!(
        domains(&get(app, &b_all, "/api/v1/sites").await),
        ["bravo.test"]
    );
    assert_eq!(
        domains(&get(app, &admin_all, "/api/v1/sites").await),
        ["alpha.test", "bravo.test", "charlie.test"]
    );

    for path in site_paths(&w.alpha) {
        let r = get(app, &a_all, &path).await;
        assert_eq!(r.status, 200, "owner's token: {path}");
        assert!(
            r.json.to_string().contains("4321"),
            "{path} has the numbers"
        );
        assert_eq!(
            get(app, &admin_all, &path).await.status,
            200,
            "admin: {path}"
        );
        // Another owner's token, and the owner's own token scoped to
        // another site: the same 404 as an unknown site, no numbers.
        for (who, token) in [("b", &b_all), ("a's charlie-only", &a_charlie)] {
            let r = get(app, token, &path).await;
            assert_eq!(
                (r.status, code(&r)),
                (404, "site_not_found"),
                "{who}: {path}"
            );
            assert!(!r.json.to_string().contains("4321"), "{who}: {path} leaks");
        }
    }
    for path in site_paths("00000000-0000-4000-8000-000000000000")
        .into_iter()
        .chain(site_paths("not-a-uuid"))
    {
        let r = get(app, &admin_all, &path).await;
        assert_eq!((r.status, code(&r)), (404, "site_not_found"), "{path}");
    }
    assert_eq!(
        get(
            app,
            &a_charlie,
            &format!("/api/v1/sites/{}/series", w.charlie)
        )
        .await
        .status,
        200
    );

    // Rights are the user's as they are now: a's token loses alpha as soon
    // as a stops owning it, even though its scope is "all".
    let alpha = sites::list(&app.store)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.domain.as_str() == "alpha.test")
        .unwrap();
    app.set_owners(&alpha, &[]).await;
    let r = get(app, &a_all, &format!("/api/v1/sites/{}/series", w.alpha)).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        domains(&get(app, &a_all, "/api/v1/sites").await),
        ["charlie.test"]
    );
    let _ = w.bravo;
}

#[tokio::test]
async fn a_revoked_token_stops_at_once_and_the_list_shows_last_use() {
    let w = world().await;
    let app = &w.app;
    let a = app.login("a@example.com").await;
    let b = app.login("b@example.com").await;
    let token = create_token(&a, "laptop script", None).await;
    let (_, list) = a.text("/account/tokens").await;
    assert!(list.contains("laptop script") && list.contains("never"));
    assert!(
        !list.contains(&token),
        "the token is shown once, never in the list"
    );
    // Stored hashed: the secret is nowhere in the database.
    let stored: Vec<bson::Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<bson::Document>("api_tokens")
            .find(bson::doc! {})
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(stored.len(), 1);
    assert!(!stored[0].to_string().contains(&token[7..]));

    assert_eq!(get(app, &token, "/api/v1/sites").await.status, 200);
    let (_, list) = a.text("/account/tokens").await;
    assert!(
        list.contains("2026-11-22 10:01 UTC") && !list.contains(">never<"),
        "last use shown"
    );
    let id = stored[0]
        .get("tokenId")
        .map(|v| match v {
            bson::Bson::Binary(b) => uuid::Uuid::from_slice(&b.bytes).unwrap().to_string(),
            other => panic!("{other:?}"),
        })
        .unwrap();
    // Someone else cannot revoke it.
    let revoke = format!("/account/tokens/{id}/revoke");
    let sure = ("confirm", "yes");
    assert_eq!(
        b.post(&revoke, &[("csrf", &b.csrf), sure]).await.status(),
        404
    );
    assert_eq!(
        a.post(&revoke, &[("csrf", "wrong"), sure]).await.status(),
        403
    );
    // Without the "Sure" box, nothing is revoked.
    assert_eq!(a.post(&revoke, &[("csrf", &a.csrf)]).await.status(), 400);
    assert_eq!(get(app, &token, "/api/v1/sites").await.status, 200);
    let r = a.post(&revoke, &[("csrf", &a.csrf), sure]).await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/account/tokens?done=revoked");
    let r = get(app, &token, "/api/v1/sites").await;
    assert_eq!((r.status, code(&r)), (401, "invalid_token"));
    let (_, list) = a.text("/account/tokens?done=revoked").await;
    assert!(list.contains("was revoked") && !list.contains("laptop script"));
    assert!(list.contains("id=\"no-tokens\""));
    // A deleted user's tokens go with them.
    let token_b = create_token(&b, "b's", None).await;
    let user_b = tickertape::accounts::users::find_by_email(
        &app.store,
        &tickertape::domain::Email::parse("b@example.com").unwrap(),
    )
    .await
    .unwrap()
    .unwrap();
    tickertape::accounts::users::delete(&app.store, user_b.id)
        .await
        .unwrap();
    assert_eq!(get(app, &token_b, "/api/v1/sites").await.status, 401);
}

async fn token_count(app: &TestApp) -> u64 {
    app.store
        .db()
        .collection::<bson::Document>("api_tokens")
        .count_documents(bson::doc! {})
        .await
        .unwrap()
}

#[tokio::test]
async fn bad_token_forms_are_refused_and_change_nothing() {
    let w = world().await;
    let app = &w.app;
    let a = app.login("a@example.com").await;
    let long = "x".repeat(81);
    type Form<'a> = Vec<(&'a str, &'a str)>;
    let refused: Vec<(Form, u16, &str)> = vec![
        (
            vec![("name", ""), ("scope", "all")],
            400,
            "a name is needed",
        ),
        (vec![("name", &long), ("scope", "all")], 400, "at most 80"),
        (
            vec![("name", "x"), ("scope", "chosen")],
            400,
            "choose at least one site",
        ),
        (
            vec![("name", "x"), ("scope", "chosen"), ("site", &w.bravo)],
            400,
            "not yours",
        ),
        (
            vec![("name", "x"), ("scope", "chosen"), ("site", "nonsense")],
            400,
            "not yours",
        ),
    ];
    for (mut form, status, says) in refused {
        form.push(("csrf", &a.csrf));
        let r = a.post("/account/tokens", &form).await;
        assert_eq!(r.status(), status, "{form:?}");
        let body = r.text().await.unwrap();
        assert!(body.to_lowercase().contains(says), "{form:?}: {says}");
        assert!(!body.contains("new-token"));
    }
    let r = a
        .post(
            "/account/tokens",
            &[("csrf", "nope"), ("name", "x"), ("scope", "all")],
        )
        .await;
    assert_eq!(r.status(), 403);
    let r = app
        .anonymous()
        .post("/account/tokens", &[("name", "x"), ("scope", "all")])
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(token_count(app).await, 0);
}

#[tokio::test]
async fn every_bad_api_request_gets_a_json_error_with_a_stable_code() {
    let w = world().await;
    let app = &w.app;
    let a = app.login("a@example.com").await;
    let token = create_token(&a, "t", None).await;
    let series = format!("/api/v1/sites/{}/series", w.alpha);

    let r = call(app, "GET", None, &series).await;
    assert_eq!((r.status, code(&r)), (401, "missing_token"));
    assert!(r.headers["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Bearer"));
    for bad in [
        "tt_api_nothex",
        &format!("tt_share_{}", "a".repeat(64)),
        &format!("tt_api_{}", "0".repeat(64)),
        &token[..70],
    ] {
        let r = call(app, "GET", Some(bad), &series).await;
        assert_eq!((r.status, code(&r)), (401, "invalid_token"), "{bad}");
    }
    let basic = app
        .http
        .get(format!("{}{series}", app.address))
        .header("authorization", format!("Basic {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 401);

    let pages = format!("/api/v1/sites/{}/pages", w.alpha);
    let page_series = format!("/api/v1/sites/{}/page/series", w.alpha);
    let seconds = format!("/api/v1/sites/{}/page/seconds", w.alpha);
    let sources = format!("/api/v1/sites/{}/sources", w.alpha);
    let long_q = "q".repeat(201);
    let cases: Vec<(String, &str)> = vec![
        (format!("{series}?range=2y"), "range"),
        (format!("{series}?res=second"), "res"),
        (format!("{series}?range=custom&from=2026-11-02"), "to"),
        (format!("{series}?range=custom&to=2026-11-02"), "from"),
        (format!("{series}?range=custom&from=&to="), "from"),
        (format!("{series}?range=24h&from=yesterday"), "from"),
        (
            format!("{series}?range=custom&from=2026-2-01&to=2026-11-01"),
            "from",
        ),
        (
            format!("{series}?range=custom&from=2026-02-30&to=2026-11-01"),
            "from",
        ),
        (
            format!("{series}?range=custom&from=2026-11-01&to=2026-11-01%20"),
            "to",
        ),
        (
            format!("{series}?range=custom&from=1999-12-31&to=2026-11-01"),
            "from",
        ),
        (
            format!("{series}?range=custom&from=2000-01-01&to=2026-11-01"),
            "res",
        ),
        (format!("{series}?range=lastmonth&res=minute"), "res"),
        (format!("{series}?range=24h&range=1h"), "query"),
        (
            format!("{series}?range=custom&from=2026-11-02&to=2026-11-01"),
            "to",
        ),
        (
            format!("{series}?range=custom&from=x&to=2026-11-01"),
            "from",
        ),
        (format!("{series}?range=12mo&res=minute"), "res"),
        (format!("{pages}?limit=0"), "limit"),
        (format!("{pages}?limit=1001"), "limit"),
        (format!("{pages}?limit=ten"), "limit"),
        (format!("{pages}?offset=-1"), "offset"),
        (format!("{pages}?offset=%2B1"), "offset"),
        (format!("{pages}?limit=1.0"), "limit"),
        (format!("{pages}?q=%20{}", "q".repeat(200)), "q"),
        (format!("{pages}?q={long_q}"), "q"),
        (page_series.clone(), "path"),
        (format!("{page_series}?path="), "path"),
        (format!("{page_series}?path=no-slash"), "path"),
        (format!("{page_series}?path=/{}", "a".repeat(512)), "path"),
        (format!("{seconds}?path=/secret-page"), "minute"),
        (
            format!("{seconds}?path=/secret-page&minute=10:01"),
            "minute",
        ),
        (format!("{seconds}?minute=2026-11-22T10:01"), "path"),
        (
            format!("{seconds}?path=/secret-page&minute=1999-11-22T10:01"),
            "minute",
        ),
        (
            format!("{seconds}?path=/secret-page&minute=2026-11-22"),
            "minute",
        ),
        (format!("{sources}?source={}", "s".repeat(101)), "source"),
        (format!("{sources}?source=a%07b"), "source"),
        (format!("{sources}?path=no-slash"), "path"),
        (format!("{sources}?limit=1001"), "limit"),
        (format!("{sources}?range=custom&from=2026-11-02"), "to"),
        (format!("{sources}?source=google%0A"), "source"),
    ];
    for (path, parameter) in cases {
        let r = get(app, &token, &path).await;
        assert_eq!((r.status, code(&r)), (400, "bad_parameter"), "{path}");
        assert_eq!(r.json["error"]["parameter"], parameter, "{path}");
        assert!(!r.json["error"]["message"].as_str().unwrap().is_empty());
    }
    // An unknown range names the valid ones.
    let r = get(app, &token, &format!("{series}?range=2y")).await;
    let message = r.json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "choose 1h, 24h, today, yesterday, 7d, 30d, month, lastmonth or 12mo, or custom"
        ),
        "{message}"
    );
    let r = get(app, &token, "/api/v1/nothing").await;
    assert_eq!((r.status, code(&r)), (404, "no_such_endpoint"));
    for method in ["POST", "DELETE", "PUT"] {
        let r = call(app, method, Some(&token), &series).await;
        assert_eq!(
            (r.status, code(&r)),
            (405, "method_not_allowed"),
            "{method}"
        );
    }
    let r = call(app, "POST", None, "/api/v1/openapi.json").await;
    assert_eq!(r.status, 405);
    // Nothing was written by any of it: the one token, the same views.
    assert_eq!(token_count(app).await, 1);
    assert_eq!(
        app.total_views(tickertape::domain::Resolution::Minute)
            .await,
        4331
    );
}

/// An empty optional parameter is an absent one, and a path that
/// starts with `/` but that no page can have reads as a page without views,
/// as docs/openapi.json says (the fuzzer holds the server to it).
#[tokio::test]
async fn empty_parameters_are_absent_and_impossible_pages_have_no_views() {
    let w = world().await;
    let app = &w.app;
    let a = app.login("a@example.com").await;
    let token = create_token(&a, "t", None).await;
    let site = format!("/api/v1/sites/{}", w.alpha);
    for (empty, absent) in [
        ("/series?range=&res=&from=&to=", "/series"),
        ("/pages?range=&res=&q=&limit=&offset=", "/pages"),
        ("/sources?path=&source=&limit=&offset=", "/sources"),
        (
            "/page/series?path=/secret-page&range=&res=",
            "/page/series?path=/secret-page",
        ),
    ] {
        let with_empty = get(app, &token, &format!("{site}{empty}")).await;
        assert_eq!(with_empty.status, 200, "{empty}");
        assert_eq!(
            with_empty.json,
            get(app, &token, &format!("{site}{absent}")).await.json,
            "{empty} is {absent}"
        );
    }
    assert_eq!(
        get(app, &token, &format!("{site}/sources?path="))
            .await
            .json["total"],
        4321,
        "the whole site's sources"
    );
    // Control characters, undecodable escapes, or more than 512 bytes once
    // decoded: a path no page can have, so no views (not an error).
    let long = format!("/{}", "é".repeat(300));
    for path in [
        "/secret-page%01",
        "/secret-page%25FF",
        "/a%E2%80%AE",
        long.as_str(),
    ] {
        let series = get(app, &token, &format!("{site}/page/series?path={path}")).await;
        assert_eq!(
            (series.status, &series.json["total"]),
            (200, &0.into()),
            "{path}"
        );
        assert_eq!(
            series.json["points"].as_array().unwrap().len(),
            24,
            "{path}"
        );
        let seconds = get(
            app,
            &token,
            &format!("{site}/page/seconds?path={path}&minute=2026-11-22T10:01"),
        )
        .await;
        assert_eq!((seconds.status, &seconds.json["total"]), (200, &0.into()));
        assert_eq!(seconds.json["points"].as_array().unwrap().len(), 60);
        let sources = get(app, &token, &format!("{site}/sources?path={path}")).await;
        assert_eq!((sources.status, &sources.json["total"]), (200, &0.into()));
        let whole = get(app, &token, &format!("{site}/sources")).await;
        assert_eq!(sources.json["covered"], whole.json["covered"], "{path}");
    }
    // The same page however its path is escaped.
    let escaped = get(
        app,
        &token,
        &format!("{site}/page/series?path=/secret%252Dpage"),
    )
    .await;
    assert_eq!(escaped.json["total"], 4321);
    assert_eq!(escaped.json["path"], "/secret-page");
}

/// The numbers of a CSV's second column.
async fn csv_column(login: &Login, path: &str, column: usize) -> Vec<String> {
    let (status, body) = login.text(path).await;
    assert_eq!(status, 200, "{path}");
    body.lines()
        .skip(1)
        .map(|l| l.split(',').nth(column).unwrap().to_owned())
        .collect()
}

fn numbers(json: &Value, list: &str, field: &str) -> Vec<String> {
    json[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| match &p[field] {
            Value::Number(n) if n.is_f64() => format!("{:.1}", n.as_f64().unwrap()),
            other => other.to_string().trim_matches('"').to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn the_api_serves_the_same_numbers_as_the_pages() {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("n.test", &[]).await;
    let mut hits = Vec::new();
    for (page, minutes_ago, second, n, source) in [
        ("n.test/a", 0, 7, 3, Some("google.com")),
        ("n.test/a", 0, 9, 1, Some("direct")),
        ("n.test/a", 2, 59, 2, Some("news.ycombinator.com")),
        ("n.test/b", 0, 7, 2, Some("newsletter")),
        ("n.test/b", 60 * 30, 0, 5, Some("google.com")),
        ("n.test/c", 60 * 24 * 5, 0, 4, None),
        ("n.test/a", 60 * 24 * 40, 0, 6, Some("duckduckgo.com")),
    ] {
        let at = chrono::DurationRound::duration_trunc(t0(), chrono::TimeDelta::minutes(1))
            .unwrap()
            - chrono::TimeDelta::minutes(minutes_ago)
            + chrono::TimeDelta::seconds(second);
        hits.extend(std::iter::repeat_n((page, at, source), n));
    }
    app.write_hits(&hits).await;
    let admin = app.login("admin@example.com").await;
    let token = create_token(&admin, "numbers", None).await;
    let id = site.id.to_string();
    let base = format!("/sites/{id}");
    let api = format!("/api/v1/sites/{id}");

    for range in [
        "range=1h",
        "range=24h",
        "range=7d",
        "range=30d",
        "range=12mo",
        "range=today",
        "range=yesterday",
        "range=month",
        "range=lastmonth",
        "range=24h&res=day",
        "range=7d&res=day",
        "range=custom&from=2026-11-22T09:30&to=2026-11-22T10:30&res=hour",
        "range=custom&from=2026-10-01&to=2026-11-22",
    ] {
        let series = get(&app, &token, &format!("{api}/series?{range}")).await;
        assert_eq!(series.status, 200, "{range}");
        assert_eq!(
            numbers(&series.json, "points", "views"),
            csv_column(&admin, &format!("{base}/series.csv?{range}"), 1).await,
            "site series, {range}"
        );
        let (_, dashboard) = admin.text(&format!("{base}?{range}")).await;
        let total = series.json["total"].as_i64().unwrap();
        let shown = format!("id=\"total\">{}<", tickertape::web::fmt::thousands(&total));
        assert!(
            dashboard.contains(&shown),
            "dashboard total {total}, {range}"
        );

        let pages = get(&app, &token, &format!("{api}/pages?{range}")).await;
        assert_eq!(pages.json["total"].as_i64().unwrap(), total, "{range}");
        assert_eq!(
            numbers(&pages.json, "pages", "path"),
            csv_column(&admin, &format!("{base}/pages.csv?{range}"), 0).await
        );
        assert_eq!(
            numbers(&pages.json, "pages", "views"),
            csv_column(&admin, &format!("{base}/pages.csv?{range}"), 1).await
        );
        assert_eq!(
            numbers(&pages.json, "pages", "share"),
            csv_column(&admin, &format!("{base}/pages.csv?{range}"), 2).await
        );

        for scope in ["", "&path=/a", "&path=/b"] {
            let sources = get(&app, &token, &format!("{api}/sources?{range}{scope}")).await;
            assert_eq!(sources.status, 200, "{range}{scope}");
            let csv = format!("{base}/sources.csv?{range}{scope}");
            // The CSV's "(none)" row is the API's `none` (no `other` here).
            let none = &sources.json["none"];
            for (column, field) in [
                "source",
                "views",
                "share",
                "comparedViews",
                "previousPeriodViews",
            ]
            .into_iter()
            .enumerate()
            {
                let mut api = numbers(&sources.json, "sources", field);
                if none["views"].as_i64().unwrap() > 0 {
                    api.push(match field {
                        "source" => "(none)".to_owned(),
                        "share" => format!("{:.1}", none[field].as_f64().unwrap()),
                        _ => none[field].to_string(),
                    });
                }
                assert_eq!(
                    api,
                    csv_column(&admin, &csv, column).await,
                    "sources {field}, {range}{scope}"
                );
            }
        }
        for path in ["/a", "/b"] {
            let page = get(
                &app,
                &token,
                &format!("{api}/page/series?path={path}&{range}"),
            )
            .await;
            assert_eq!(
                numbers(&page.json, "points", "views"),
                csv_column(&admin, &format!("{base}/series.csv?{range}&path={path}"), 1).await,
                "page {path}, {range}"
            );
            let (_, report) = admin
                .text(&format!("{base}/page?path={path}&{range}"))
                .await;
            let shown = format!(
                "id=\"total\">{}<",
                tickertape::web::fmt::thousands(&page.json["total"].as_i64().unwrap())
            );
            assert!(report.contains(&shown), "page report total, {path} {range}");
        }
    }
    let seconds = get(
        &app,
        &token,
        &format!("{api}/page/seconds?path=/a&minute=2026-11-22T10:01"),
    )
    .await;
    assert_eq!(seconds.json["total"], 4);
    assert_eq!(seconds.json["points"][7]["views"], 3);
    assert_eq!(
        numbers(&seconds.json, "points", "views"),
        csv_column(
            &admin,
            &format!("{base}/seconds.csv?path=/a&minute=2026-11-22T10:01"),
            1
        )
        .await
    );
    // Filter and paging cut the same list.
    let filtered = get(
        &app,
        &token,
        &format!("{api}/pages?range=12mo&q=A&limit=1&offset=0"),
    )
    .await;
    assert_eq!(filtered.json["matching"], 1);
    assert_eq!(numbers(&filtered.json, "pages", "path"), ["/a"]);
    let second = get(
        &app,
        &token,
        &format!("{api}/pages?range=12mo&limit=1&offset=1"),
    )
    .await;
    assert_eq!(second.json["matching"], 3);
    assert_eq!(second.json["pages"].as_array().unwrap().len(), 1);
    let sources = get(
        &app,
        &token,
        &format!("{api}/sources?range=12mo&source=GOOGLE&limit=1"),
    )
    .await;
    assert_eq!(sources.json["matching"], 1, "{}", sources.json);
    assert_eq!(numbers(&sources.json, "sources", "source"), ["google.com"]);
    assert_eq!(sources.json["total"], 19);
    // Every view of the year, and the four of /c without a source.
    assert_eq!(sources.json["views"], 23);
    assert_eq!(sources.json["none"]["views"], 4);
    let second = get(
        &app,
        &token,
        &format!("{api}/sources?range=12mo&limit=2&offset=2"),
    )
    .await;
    assert_eq!(second.json["matching"], 5, "{}", second.json);
    assert_eq!(
        numbers(&second.json, "sources", "views"),
        ["2", "2"],
        "third and fourth by views"
    );
    // The sites list's figures.
    let list = get(&app, &token, "/api/v1/sites").await;
    let views = &list.json["sites"][0]["views"];
    let (_, sites_page) = admin.text("/sites").await;
    for key in ["today", "last7Days", "last30Days"] {
        let n = views[key].as_i64().unwrap();
        assert!(
            sites_page.contains(&format!(">{}<", tickertape::web::fmt::thousands(&n))),
            "{key} = {n} on the sites list"
        );
    }
}

#[tokio::test]
async fn the_openapi_document_is_served_and_every_operation_is_checked() {
    let w = world().await;
    let app = &w.app;
    let r = app
        .http
        .get(format!("{}/api/v1/openapi.json", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let served: Value = r.json().await.unwrap();
    assert_eq!(&served, openapi::document(), "served = docs/openapi.json");
    assert_eq!(served["openapi"], "3.1.0");
    // The checker can fail: a body off the schema is refused.
    let wrong = serde_json::json!({"site": "not-a-uuid", "period": {}, "total": -1, "points": []});
    assert!(openapi::check_against("/components/schemas/Series", &wrong).is_err());
    let extra = serde_json::json!({"sites": [], "secret": 1});
    assert!(openapi::check_against("/components/schemas/SiteList", &extra).is_err());

    // One of each documented answer, through the checker.
    let a = app.login("a@example.com").await;
    let token = create_email_token(&a, "t").await;
    let b = app.login("b@example.com").await;
    let other = create_email_token(&b, "b").await;
    call(app, "GET", None, "/api/v1/openapi.json").await;
    call(app, "POST", None, "/api/v1/openapi.json").await;
    // Filtered reports and funnels read the visit store, which this world
    // has no visits in: their answers are checked here, their numbers in
    // tests/api/segments.rs.
    let filtered = [
        "/visits?range=24h&filter=country:US&filter=page:/secret-page",
        "/funnel?step=/&step=/secret-page&range=24h",
        "/goals?range=24h",
    ]
    .map(|p| format!("/api/v1/sites/{}{p}", w.alpha));
    for path in std::iter::once("/api/v1/sites".to_owned())
        .chain(site_paths(&w.alpha))
        .chain(filtered)
    {
        get(app, &token, &path).await;
        call(app, "GET", None, &path).await;
        call(app, "DELETE", Some(&token), &path).await;
        if path != "/api/v1/sites" {
            get(app, &other, &path).await;
            let bad = format!("{path}&range=nope&minute=x");
            get(app, &token, &bad).await;
        }
    }
    let reader = create_token(&a, "reads", None).await;
    crate::email::subscription_answers(app, &token, &other, &reader, &w.alpha).await;
    // `preparing`: a site whose totals are not built yet, with a report
    // time limit its page buckets cannot meet over a year.
    let slow = spawn_app_with(|s| s.database.report_max_time_ms = 1).await;
    let site = slow.add_site("slow.test", &[]).await;
    let owner = slow.add_user("c@example.com", Role::Owner).await;
    slow.set_owners(&site, &[owner.id]).await;
    let pages: Vec<String> = (0..20).map(|i| format!("slow.test/p{i}")).collect();
    let mut hits = Vec::new();
    for week in 0..52 {
        for page in &pages {
            hits.push((page.as_str(), t0() - chrono::TimeDelta::days(week * 7)));
        }
    }
    crate::site_totals::write_old_page_buckets(&slow.store, &hits).await;
    crate::site_totals::mark_old(&slow.store, &site).await;
    slow.ingest.directory.reload(&slow.store).await.unwrap();
    let c = create_token(&slow.login("c@example.com").await, "c", None).await;
    for op in [
        "series?",
        "pages?",
        "visits?",
        "sources?",
        "breakdown?dimension=browser&",
    ] {
        let path = format!("/api/v1/sites/{}/{op}range=12mo", site.id);
        let r = get(&slow, &c, &path).await;
        assert_eq!((r.status, code(&r)), (202, "preparing"), "{path}");
    }
    let seen = openapi::seen().lock().unwrap().clone();
    let missing: Vec<_> = openapi::documented().difference(&seen).cloned().collect();
    assert!(
        missing.is_empty(),
        "documented but never checked: {missing:?}"
    );
}

#[tokio::test]
async fn with_the_database_down_the_api_and_share_links_answer_503() {
    use crate::proxy::{write_target, Mode, Proxy};
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let app = spawn_app_on(&proxy.uri(), test_settings()).await;
    app.add_user("a@example.com", Role::Admin).await;
    let site = app.add_site("down.test", &[]).await;
    let a = app.login("a@example.com").await;
    let token = create_token(&a, "t", None).await;
    let r = a
        .post(
            &format!("/sites/{}/share", site.id),
            &[("csrf", &a.csrf), ("label", "l"), ("expires", "")],
        )
        .await;
    let page = r.text().await.unwrap();
    let start = page.find("/share/tt_share_").unwrap();
    let link = page[start..start + 7 + 9 + 64].to_owned();
    let series = format!("/api/v1/sites/{}/series", site.id);
    assert_eq!(get(&app, &token, &series).await.status, 200);

    proxy.set(Mode::Down);
    for path in ["/api/v1/sites", series.as_str()] {
        let began = std::time::Instant::now();
        let r = get(&app, &token, path).await;
        assert_eq!(
            (r.status, code(&r)),
            (503, "database_unavailable"),
            "{path}"
        );
        assert!(r.headers.contains_key("retry-after"));
        assert!(began.elapsed() < std::time::Duration::from_secs(8));
    }
    let r = app.anonymous().get(&link).await;
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["referrer-policy"], "no-referrer");
    proxy.set(Mode::Pass);
}

/// A site in Europe/Berlin: the API reads its days in its zone, as the
/// dashboard does (a view at 00:30 Berlin on the 22nd is 23:30 UTC on the
/// 21st).
#[tokio::test]
async fn the_api_reads_a_site_in_its_time_zone_like_the_pages() {
    use chrono::TimeZone;
    let app = spawn_app().await;
    let owner = app.add_user("z@example.com", Role::Owner).await;
    let site = app.add_site("berlin.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let berlin = tickertape::domain::TimeZone::parse("Europe/Berlin").unwrap();
    sites::set_time_zone(&app.store, &site, berlin)
        .await
        .unwrap();
    app.ingest.directory.reload(&app.store).await.unwrap();
    let at = |d, h, m| chrono::Utc.with_ymd_and_hms(2026, 11, d, h, m, 0).unwrap();
    let hits: Vec<(&str, _)> = std::iter::repeat_n(("berlin.test/a", at(21, 23, 30)), 2)
        .chain(std::iter::repeat_n(("berlin.test/a", at(22, 0, 30)), 3))
        .chain(std::iter::repeat_n(("berlin.test/a", at(21, 22, 30)), 4))
        .collect();
    app.write_hits(&hits).await;
    let login = app.login("z@example.com").await;
    let token = create_token(&login, "zoned", None).await;
    let range = "range=custom&from=2026-11-22&to=2026-11-22&res=hour";
    let api = get(
        &app,
        &token,
        &format!("/api/v1/sites/{}/series?{range}", site.id),
    )
    .await;
    assert_eq!(api.status, 200);
    assert_eq!(api.json["total"], 5, "the Berlin 22nd: {}", api.json);
    let (status, html) = login.text(&format!("/sites/{}?{range}", site.id)).await;
    assert_eq!(status, 200);
    assert!(html.contains("id=\"total\">5<"), "the dashboard agrees");
    let page = get(
        &app,
        &token,
        &format!("/api/v1/sites/{}/page/series?path=/a&{range}", site.id),
    )
    .await;
    assert_eq!(page.json["total"], 5);
    // "today" is the Berlin day too, and the sites list names the zone.
    let today = get(
        &app,
        &token,
        &format!("/api/v1/sites/{}/series?range=today", site.id),
    )
    .await;
    assert_eq!(today.json["total"], 5, "{}", today.json);
    assert_eq!(today.json["period"]["preset"], "today");
    let list = get(&app, &token, "/api/v1/sites").await;
    assert_eq!(list.json["sites"][0]["timeZone"], "Europe/Berlin");
}

/// A preset is one range everywhere. Views fall just
/// inside and just outside each preset in Berlin: 8 days ago inside the
/// last 168 hours but before the 7th local midnight, the first Berlin
/// minutes of a day (still the day before in UTC), and 40 days ago. The
/// sites list, `/api/v1/sites`, the dashboard, the series CSV and the API
/// agree for every preset, and "7 days" is seven Berlin days.
#[tokio::test]
async fn every_preset_has_one_total_on_every_page_csv_and_api() {
    use chrono::TimeZone;
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("p.test", &[]).await;
    let berlin = tickertape::domain::TimeZone::parse("Europe/Berlin").unwrap();
    sites::set_time_zone(&app.store, &site, berlin)
        .await
        .unwrap();
    app.ingest.directory.reload(&app.store).await.unwrap();
    // t0 is 22 November 10:01 UTC, 11:01 in Berlin.
    let at = |mo, d, h, m| chrono::Utc.with_ymd_and_hms(2026, mo, d, h, m, 0).unwrap();
    let mut hits = Vec::new();
    for (when, n) in [
        (at(11, 22, 10, 0), 1),   // this hour
        (at(11, 21, 23, 5), 2),   // Berlin today, UTC yesterday
        (at(11, 21, 22, 55), 4),  // Berlin yesterday
        (at(11, 15, 23, 10), 8),  // the 7th Berlin day back: in "7 days"
        (at(11, 15, 12, 0), 16),  // within 168 hours, before that day
        (at(11, 1, 12, 0), 32),   // this month
        (at(10, 24, 12, 0), 64),  // within 30 days, last month
        (at(10, 13, 12, 0), 128), // 40 days ago
    ] {
        hits.extend(std::iter::repeat_n(("p.test/a", when), n));
    }
    app.write_hits(&hits).await;
    let admin = app.login("admin@example.com").await;
    let token = create_token(&admin, "presets", None).await;
    let id = site.id.to_string();

    let list = get(&app, &token, "/api/v1/sites").await;
    let views = &list.json["sites"][0]["views"];
    let (_, sites_page) = admin.text("/sites").await;
    let cells = num_cells(&sites_page);
    let expected = [
        ("1h", 1),
        ("24h", 1 + 2 + 4),
        ("today", 1 + 2),
        ("yesterday", 4),
        ("7d", 1 + 2 + 4 + 8),
        ("30d", 1 + 2 + 4 + 8 + 16 + 32 + 64),
        ("month", 1 + 2 + 4 + 8 + 16 + 32),
        ("lastmonth", 64 + 128),
        ("12mo", 255),
    ];
    for (preset, want) in expected {
        let api = get(
            &app,
            &token,
            &format!("/api/v1/sites/{id}/series?range={preset}"),
        )
        .await;
        assert_eq!(api.json["total"], want, "API, {preset}: {}", api.json);
        let csv: i64 = csv_column(&admin, &format!("/sites/{id}/series.csv?range={preset}"), 1)
            .await
            .iter()
            .map(|v| v.parse::<i64>().unwrap())
            .sum();
        assert_eq!(csv, want, "series CSV, {preset}");
        let (_, dashboard) = admin.text(&format!("/sites/{id}?range={preset}")).await;
        assert!(
            dashboard.contains(&format!(
                "id=\"total\">{}<",
                tickertape::web::fmt::thousands(&want)
            )),
            "dashboard, {preset}"
        );
        let column = match preset {
            "today" => Some((0, "today")),
            "7d" => Some((1, "last7Days")),
            "30d" => Some((2, "last30Days")),
            _ => None,
        };
        if let Some((cell, field)) = column {
            assert_eq!(views[field], want, "/api/v1/sites {field}");
            assert_eq!(
                cells[cell],
                tickertape::web::fmt::thousands(&want),
                "sites list {preset}"
            );
        }
    }
}

/// An empty `filter=` is an absent one, as the document says of every
/// empty parameter: on the API, the report pages and the CSV files.
#[tokio::test]
async fn an_empty_filter_is_ignored_everywhere() {
    let app = spawn_app().await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("empty-filter.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let now = tickertape::clock::Clock::now(&*app.clock);
    app.write_hits(&[("empty-filter.test/", now), ("empty-filter.test/a", now)])
        .await;
    let login = app.login("owner@example.com").await;
    let token = create_token(&login, "filters", None).await;
    let id = site.id;
    let plain = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/visits?range=today"),
    )
    .await;
    assert_eq!(plain.status, 200);
    for query in ["filter=", "filter=&filter=", "filter=page:/a&filter="] {
        let path = format!("/api/v1/sites/{id}/visits?range=today&{query}");
        let r = get(&app, &token, &path).await;
        assert_eq!(r.status, 200, "{query}: {}", r.json);
        if !query.contains("page") {
            assert_eq!(r.json["views"], plain.json["views"], "{query}");
        }
    }
    for path in [
        format!("/sites/{id}?range=today&filter="),
        format!("/sites/{id}/pages.csv?range=today&filter="),
        format!("/sites/{id}/visits.csv?range=today&filter="),
    ] {
        assert_eq!(login.get(&path).await.status(), 200, "{path}");
    }
}
