//! The goals an owner marks on a site's settings page,
//! how they are stored, and every refusal.

use tickertape::accounts::Role;
use tickertape::domain::{Goal, MAX_GOALS_PER_SITE};
use tickertape::storage::sites::{self, GoalChangeError, Site};

use crate::helpers::*;

/// An app with a site `g.test` owned by `owner@example.com`, and another
/// owner with a site of their own.
async fn world() -> (TestApp, Site, Login) {
    let app = spawn_app().await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("g.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let login = app.login("owner@example.com").await;
    (app, site, login)
}

/// The site's goals as the store has them now.
async fn stored_goals(app: &TestApp, site: &Site) -> Vec<Goal> {
    sites::list(&app.store)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.id == site.id)
        .expect("the site")
        .goals
}

/// The raw `goals` array of the site's document.
async fn raw_goals(app: &TestApp, site: &Site) -> Option<Vec<String>> {
    let doc = app
        .store
        .db()
        .collection::<bson::Document>(sites::COLLECTION)
        .find_one(bson::doc! {"_id": bson::Uuid::from(site.id.as_uuid())})
        .await
        .unwrap()
        .unwrap();
    doc.get_array("goals")
        .ok()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
}

fn event(name: &str) -> Goal {
    Goal::parse("event", name).unwrap()
}

fn page(path: &str) -> Goal {
    Goal::parse("page", path).unwrap()
}

#[tokio::test]
async fn an_owner_adds_an_event_and_a_page_goal_sees_them_and_removes_one() {
    let (app, site, owner) = world().await;
    let settings = format!("/sites/{}/settings", site.id);
    let add = format!("/sites/{}/goals", site.id);
    let (status, html) = owner.text(&settings).await;
    assert_eq!(status, 200);
    assert!(html.contains("id=\"goals\"") && html.contains("id=\"goals-none\""));
    // The help says how to send an event and what a page goal counts.
    assert!(
        html.contains("<code>tickertape.track(\"Signup\")</code>"),
        "{html}"
    );
    assert!(html.contains("data-tt-event="));
    assert!(html.contains("counts the views of that path"));
    assert_eq!(
        raw_goals(&app, &site).await,
        None,
        "absent until one is added"
    );

    let r = owner
        .post(
            &add,
            &[
                ("csrf", &owner.csrf),
                ("kind", "event"),
                ("name", " Signup "),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        r.headers()["location"],
        format!("{settings}?done=goal-added#goals").as_str()
    );
    let r = owner
        .post(
            &add,
            &[
                ("csrf", &owner.csrf),
                ("kind", "page"),
                ("name", "/thanks?from=mail"),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);

    let (_, html) = owner.text(&format!("{settings}?done=goal-added")).await;
    assert!(html.contains("The goal was added."));
    let list = &html[html.find("id=\"goals-list\"").expect("a list")..];
    let list = &list[..list.find("</table>").unwrap()];
    assert!(
        list.contains("<td>Event</td><td><code>Signup</code></td>")
            && list.contains("<td>Page path</td><td><code>/thanks</code></td>"),
        "{list}"
    );
    assert_eq!(
        list.matches("action=\"/sites/").count(),
        2,
        "a Remove form each"
    );
    assert!(html.contains("2 of at most 20 goals."));
    assert_eq!(
        stored_goals(&app, &site).await,
        vec![event("Signup"), page("/thanks")]
    );
    assert_eq!(
        raw_goals(&app, &site).await,
        Some(vec!["event:Signup".to_owned(), "page:/thanks".to_owned()])
    );
    // The directory (which the pixel and the reports read) has them too.
    assert_eq!(
        app.ingest.directory.by_id(&site.id).unwrap().goals,
        vec![event("Signup"), page("/thanks")]
    );

    let r = owner
        .post(
            &format!("/sites/{}/goals/remove", site.id),
            &[("csrf", &owner.csrf), ("goal", "event:Signup")],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        r.headers()["location"],
        format!("{settings}?done=goal-removed#goals").as_str()
    );
    assert_eq!(stored_goals(&app, &site).await, vec![page("/thanks")]);
    let (_, html) = owner.text(&settings).await;
    assert!(!html.contains("<code>Signup</code>") && html.contains("<code>/thanks</code>"));

    // Removing it again (a second tab) says it is not there.
    let r = owner
        .post(
            &format!("/sites/{}/goals/remove", site.id),
            &[("csrf", &owner.csrf), ("goal", "event:Signup")],
        )
        .await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("This goal is not there"));
    assert_eq!(stored_goals(&app, &site).await, vec![page("/thanks")]);
}

#[tokio::test]
async fn every_bad_goal_gets_a_clear_answer_and_changes_nothing() {
    let (app, site, owner) = world().await;
    let add = format!("/sites/{}/goals", site.id);
    let post = |kind: &'static str, name: String| {
        let (owner, add) = (&owner, &add);
        async move {
            let r = owner
                .post(
                    add,
                    &[("csrf", &owner.csrf), ("kind", kind), ("name", &name)],
                )
                .await;
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let long = "a".repeat(65);
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "event",
            "".into(),
            "goal_name",
            "Enter the event&#39;s name",
        ),
        (
            "event",
            "   ".into(),
            "goal_name",
            "Enter the event&#39;s name",
        ),
        (
            "event",
            long.clone(),
            "goal_name",
            "An event name is at most 64 characters.",
        ),
        (
            "event",
            "<b>Sign</b>".into(),
            "goal_name",
            "An event name has only letters, digits, spaces and - _ . : /.",
        ),
        (
            "event",
            "a$b".into(),
            "goal_name",
            "An event name has only letters",
        ),
        (
            "page",
            "".into(),
            "goal_name",
            "Enter the page&#39;s path, such as /thanks.",
        ),
        (
            "page",
            "thanks".into(),
            "goal_name",
            "A page goal is a path of this site starting with /",
        ),
        (
            "page",
            "https://g.test/thanks".into(),
            "goal_name",
            "not a full address",
        ),
        (
            "page",
            format!("/{}", "x".repeat(600)),
            "goal_name",
            "The page path is not usable: the page is longer than allowed.",
        ),
        (
            "page",
            "/a%00".into(),
            "goal_name",
            "The page path is not usable: the page contains a control character.",
        ),
        (
            "click",
            "Signup".into(),
            "goal_kind",
            "A goal is an event or a page path.",
        ),
    ];
    for (kind, name, field, message) in cases {
        let (status, html) = post(kind, name.clone()).await;
        assert_eq!(status, 400, "{kind} {name:?}");
        let html = html.replace("&#x27;", "&#39;");
        assert!(html.contains(message), "{kind} {name:?}: {html}");
        assert!(
            html.contains(&format!("id=\"{field}-error\""))
                && html.contains(&format!("aria-describedby=\"{field}-error\"")),
            "{kind} {name:?}: the field is marked"
        );
        assert!(html.contains("No goal was changed"));
        assert_eq!(stored_goals(&app, &site).await, vec![], "{kind} {name:?}");
    }
    // What was typed is kept (escaped) for correcting it.
    let (_, html) = post("page", "thanks".into()).await;
    assert!(html.contains("value=\"thanks\"") && html.contains("<option value=\"page\" selected>"));
    let (_, html) = post("event", "<b>Sign</b>".into()).await;
    let field = &html[html.find("id=\"goal_name\"").unwrap()..];
    let field = &field[..field.find('>').unwrap()];
    assert!(
        !html.contains("<b>Sign</b>") && field.contains("Sign&"),
        "{field}"
    );

    // A duplicate is answered as already there, with no second copy.
    assert_eq!(post("event", "Signup".into()).await.0, 303);
    let (status, html) = post("event", "Signup ".into()).await;
    assert_eq!(status, 400);
    assert!(html.contains("This goal is already there."), "{html}");
    assert_eq!(
        raw_goals(&app, &site).await,
        Some(vec!["event:Signup".to_owned()])
    );
    // An event and a page of one name are two goals; case counts.
    assert_eq!(post("event", "signup".into()).await.0, 303);
    assert_eq!(post("page", "/Signup".into()).await.0, 303);

    // Up to 20, then the 21st is refused.
    for i in 3..MAX_GOALS_PER_SITE {
        assert_eq!(post("page", format!("/step/{i}")).await.0, 303, "goal {i}");
    }
    assert_eq!(stored_goals(&app, &site).await.len(), MAX_GOALS_PER_SITE);
    let (status, html) = post("event", "One too many".into()).await;
    assert_eq!(status, 400);
    assert!(
        html.contains("A site has at most 20 goals: remove one before adding another."),
        "{html}"
    );
    assert!(html.contains("id=\"goal_name-error\"") && html.contains("value=\"One too many\""));
    // A duplicate of a full list is still "already there".
    let (status, html) = post("event", "Signup".into()).await;
    assert_eq!(status, 400);
    assert!(html.contains("This goal is already there."));
    assert_eq!(stored_goals(&app, &site).await.len(), MAX_GOALS_PER_SITE);
    assert!(!stored_goals(&app, &site)
        .await
        .contains(&event("One too many")));

    // A Remove post naming no goal is refused.
    for bad in ["", "Signup", "click:Signup", "event:a$b"] {
        let r = owner
            .post(
                &format!("/sites/{}/goals/remove", site.id),
                &[("csrf", &owner.csrf), ("goal", bad)],
            )
            .await;
        assert_eq!(r.status(), 400, "{bad:?}");
    }
    assert_eq!(stored_goals(&app, &site).await.len(), MAX_GOALS_PER_SITE);
}

#[tokio::test]
async fn forged_posts_strangers_and_other_owners_sites_change_nothing() {
    let (app, site, owner) = world().await;
    let other = app.add_user("other@example.com", Role::Owner).await;
    let theirs = app.add_site("other.test", &[]).await;
    app.set_owners(&theirs, &[other.id]).await;
    sites::add_goal(&app.store, &theirs.id, &event("Theirs"))
        .await
        .unwrap();
    sites::add_goal(&app.store, &site.id, &event("Mine"))
        .await
        .unwrap();
    app.ingest.directory.reload(&app.store).await.unwrap();
    let add = format!("/sites/{}/goals", site.id);
    let remove = format!("/sites/{}/goals/remove", site.id);

    // A forged form: a wrong token, or none.
    let r = owner
        .post(
            &add,
            &[("csrf", "forged"), ("kind", "event"), ("name", "Forged")],
        )
        .await;
    assert_eq!(r.status(), 403);
    let r = owner
        .post(&add, &[("kind", "event"), ("name", "Forged")])
        .await;
    assert!(r.status() == 400 || r.status() == 403, "{}", r.status());
    let r = owner
        .post(&remove, &[("csrf", "forged"), ("goal", "event:Mine")])
        .await;
    assert_eq!(r.status(), 403);
    let r = owner.post(&remove, &[("goal", "event:Mine")]).await;
    assert!(r.status() == 400 || r.status() == 403, "{}", r.status());

    // Another owner's site id in the address: not found, as for a site
    // that does not exist.
    let r = owner
        .post(
            &format!("/sites/{}/goals", theirs.id),
            &[("csrf", &owner.csrf), ("kind", "event"), ("name", "Forged")],
        )
        .await;
    assert_eq!(r.status(), 404);
    let r = owner
        .post(
            &format!("/sites/{}/goals/remove", theirs.id),
            &[("csrf", &owner.csrf), ("goal", "event:Theirs")],
        )
        .await;
    assert_eq!(r.status(), 404);
    let (status, _) = owner.text(&format!("/sites/{}/settings", theirs.id)).await;
    assert_eq!(status, 404);

    // Nobody signed in.
    let anonymous = app.anonymous();
    let r = anonymous
        .post(
            &add,
            &[("csrf", "x"), ("kind", "event"), ("name", "Forged")],
        )
        .await;
    assert!(
        r.status().is_client_error() || r.status() == 303,
        "{}",
        r.status()
    );

    assert_eq!(stored_goals(&app, &site).await, vec![event("Mine")]);
    assert_eq!(stored_goals(&app, &theirs).await, vec![event("Theirs")]);
    // An admin sees and changes any site's goals.
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let r = admin
        .post(
            &format!("/sites/{}/goals", theirs.id),
            &[("csrf", &admin.csrf), ("kind", "page"), ("name", "/done")],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        stored_goals(&app, &theirs).await,
        vec![event("Theirs"), page("/done")]
    );
}

#[tokio::test]
async fn goals_are_added_atomically_and_unknown_stored_ones_are_ignored() {
    let (app, site, _owner) = world().await;
    // Many adds at once: never more than the cap, each refused one told so.
    let adds = (0..MAX_GOALS_PER_SITE + 10).map(|i| {
        let store = app.store.clone();
        let id = site.id;
        async move { sites::add_goal(&store, &id, &event(&format!("e{i}"))).await }
    });
    let results = futures::future::join_all(adds).await;
    let added = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(added, MAX_GOALS_PER_SITE);
    assert!(results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .all(|e| matches!(e, GoalChangeError::Full)));
    assert_eq!(stored_goals(&app, &site).await.len(), MAX_GOALS_PER_SITE);

    // One goal added many times at once is stored once.
    let other = app.add_site("h.test", &[]).await;
    let adds = (0..8).map(|_| {
        let store = app.store.clone();
        let id = other.id;
        async move { sites::add_goal(&store, &id, &page("/thanks")).await }
    });
    let results = futures::future::join_all(adds).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .all(|e| matches!(e, GoalChangeError::AlreadyThere)));
    assert_eq!(
        raw_goals(&app, &other).await,
        Some(vec!["page:/thanks".to_owned()])
    );

    // A string this build does not know is left out on read, not an error.
    app.store
        .db()
        .collection::<bson::Document>(sites::COLLECTION)
        .update_one(
            bson::doc! {"_id": bson::Uuid::from(other.id.as_uuid())},
            bson::doc! {"$push": {"goals": {"$each": ["click:Buy", "event:a$b", "page:/done"]}}},
        )
        .await
        .unwrap();
    assert_eq!(
        stored_goals(&app, &other).await,
        vec![page("/thanks"), page("/done")]
    );
    // Removing is by the whole goal, and leaves the others.
    sites::remove_goal(&app.store, &other.id, &page("/thanks"))
        .await
        .unwrap();
    assert!(matches!(
        sites::remove_goal(&app.store, &other.id, &page("/thanks")).await,
        Err(GoalChangeError::NotThere)
    ));
    assert_eq!(stored_goals(&app, &other).await, vec![page("/done")]);
    // A site marked deleted takes no goals.
    sites::mark_deleted(&app.store, &other, chrono::Utc::now())
        .await
        .unwrap();
    assert!(matches!(
        sites::add_goal(&app.store, &other.id, &event("Late")).await,
        Err(GoalChangeError::NoSite)
    ));
}

#[tokio::test]
async fn an_owner_adds_a_goal_on_an_event_with_a_property_value_and_bad_ones_change_nothing() {
    let (app, site, owner) = world().await;
    let settings = format!("/sites/{}/settings", site.id);
    let add = format!("/sites/{}/goals", site.id);
    let r = owner
        .post(
            &add,
            &[
                ("csrf", &owner.csrf),
                ("kind", "event"),
                ("name", "Signup"),
                ("prop_key", " plan "),
                ("prop_value", "pro"),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let with = Goal::parse_event_with("Signup", "plan", "pro").unwrap();
    assert_eq!(stored_goals(&app, &site).await, vec![with.clone()]);
    assert_eq!(
        raw_goals(&app, &site).await,
        Some(vec![r#"event-with:["Signup","plan","pro"]"#.to_owned()])
    );
    let (_, html) = owner.text(&settings).await;
    assert!(
        html.contains("<td><code>Signup</code> with <code>plan</code> = <code>pro</code></td>"),
        "{html}"
    );
    // Half a property, a key holding a colon, an email address: refused,
    // said next to the property's fields, nothing stored.
    for (key, value) in [
        ("plan", ""),
        ("", "pro"),
        ("a:b", "x"),
        ("email", "jane@example.com"),
    ] {
        let r = owner
            .post(
                &add,
                &[
                    ("csrf", &owner.csrf),
                    ("kind", "event"),
                    ("name", "Signup"),
                    ("prop_key", key),
                    ("prop_value", value),
                ],
            )
            .await;
        assert_eq!(r.status(), 400, "{key:?} {value:?}");
        let html = r.text().await.unwrap();
        assert!(html.contains("id=\"goal_prop-error\""), "{key:?}: {html}");
        assert_eq!(stored_goals(&app, &site).await, vec![with.clone()]);
    }
    // Removed by its stored form, as the page's Remove button sends it.
    let r = owner
        .post(
            &format!("/sites/{}/goals/remove", site.id),
            &[("csrf", &owner.csrf), ("goal", &with.stored())],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert!(stored_goals(&app, &site).await.is_empty());
}
