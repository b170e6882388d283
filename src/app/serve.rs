//! `serve`'s steps around the application: the embedded database (and
//! where CLI commands find it), the indexes, the sharding warnings, the
//! first admin and the demo, then [`Application`] until stopped.

use anyhow::Context;
use std::path::PathBuf;

use super::Application;
use crate::accounts::password::NewPassword;
use crate::accounts::{users, Role};
use crate::clock;
use crate::demo::{self, DemoOptions};
use crate::domain::{DomainName, Email};
use crate::localdb::{self, LocalDb, LocalDbOptions};
use crate::settings::{public_url_or, LocalDbSettings, Settings};
use crate::storage::{sharding, Store};
use crate::web::snippets;

/// Where a running `serve` records its embedded database, so that CLI
/// commands run beside it use the same server instead of a second one
/// (which could not open the locked data directory).
pub fn local_uri_file(local: &LocalDbSettings) -> PathBuf {
    local.data_dir.join("localdb.uri")
}

pub async fn start_local(local: &LocalDbSettings) -> anyhow::Result<LocalDb> {
    let binary = localdb::locate(local.localdb_bin.as_deref())?;
    let db = LocalDb::start(
        &binary,
        &local.data_dir.join("db"),
        &LocalDbOptions::default(),
    )
    .await?;
    Ok(db)
}

pub async fn stop_local(db: LocalDb) {
    let _ = tokio::task::spawn_blocking(move || db.stop()).await;
}

/// Whether `serve` has created its embedded database in `dir`.
pub fn has_local_database(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

/// The first admin `serve` creates on a database without users.
pub const FIRST_ADMIN: &str = "admin@localhost";

/// What `serve` tells about the first admin's login at start.
pub enum FirstLogin {
    /// A one-time password to print, and when it stops working.
    Password {
        email: Email,
        password: String,
        until: chrono::DateTime<chrono::Utc>,
    },
    /// The first admin's one-time password ran out before anyone chose a
    /// password of their own.
    Expired(Email),
}

/// On a database without users, creates the first admin with a one-time
/// password. While the first admin is the only user, has never chosen
/// their own password and the one-time password still works, each start
/// replaces it with a new one (same end) to print: the one printed by an earlier start may never have
/// been seen, and a password hash cannot be printed again.
pub async fn first_admin_login(store: &Store) -> anyhow::Result<Option<FirstLogin>> {
    let email = Email::parse(FIRST_ADMIN).context("the first admin's e-mail")?;
    let now = chrono::Utc::now();
    let password = NewPassword::generate();
    let users = users::count(store).await?;
    if users == 0 {
        match users::create(store, email.clone(), &password, Role::Admin, now).await {
            Ok(user) => {
                users::require_password_change(store, user.id, now).await?;
                return Ok(Some(FirstLogin::Password {
                    email,
                    password: password.expose().to_owned(),
                    until: now + users::ONE_TIME_PASSWORD_LIFETIME,
                }));
            }
            // Another process created it first.
            Err(users::UserError::EmailTaken(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // Only while the console is still the one way in: once there are other
    // users, an admin resets a password on the users page (or with
    // `user reset-login`), and a restart must not replace it.
    if users > 1 {
        return Ok(None);
    }
    let Some(user) = users::find_by_email(store, &email).await? else {
        return Ok(None);
    };
    if !user.must_change_password {
        return Ok(None);
    }
    match users::replace_one_time_password(store, user.id, &password, now).await? {
        Some(until) => Ok(Some(FirstLogin::Password {
            email,
            password: password.expose().to_owned(),
            until,
        })),
        None => Ok(Some(FirstLogin::Expired(email))),
    }
}

/// Serves until stopped: binds the port, starts the embedded database
/// unless a database is given (recording where CLI commands find it),
/// sets up the indexes, creates the first admin and the demo if asked,
/// then runs the application. `announce` shows a start-up line.
pub async fn serve(
    mut settings: Settings,
    demo_if_empty: bool,
    announce: fn(&str),
) -> anyhow::Result<()> {
    // The port before anything else: a start that cannot serve creates
    // nothing (no first admin whose password is never printed, no demo
    // written for minutes before failing).
    let listener = super::bind(&settings)?;
    let local = match settings.database.uri() {
        Some(_) => None,
        None => {
            let db = start_local(&settings.local_db).await?;
            std::fs::write(local_uri_file(&settings.local_db), db.uri())?;
            announce(&format!(
                "embedded database pid {} at {}",
                db.pid(),
                db.uri()
            ));
            Some(db)
        }
    };
    let result = async {
        let uri = match &local {
            Some(db) => db.uri().to_owned(),
            None => settings.database.uri().unwrap_or_default().to_owned(),
        };
        let db = &settings.database;
        let store = Store::connect(&db.store_options()?, &uri).await?;
        tracing::info!(topology = ?store.topology(), database = %db.name, "connected");
        super::check_store(&store)?;
        crate::indexes::ensure(&store).await?;
        for warning in sharding::warnings(&store).await {
            tracing::warn!("{warning}");
        }
        let first_admin = first_admin_login(&store).await?;
        let app = Application::build_on(&settings, store.clone(), clock::system(), listener).await?;
        if demo_if_empty {
            let options = DemoOptions {
                domain: DomainName::parse(demo::DEFAULT_DOMAIN).context("the demo domain")?,
                days: 30,
                daily_views: 4000,
                seed: 20261122,
            };
            // Journaled like the pixel's hits, a few seconds; the app's
            // appliers then write them to every store while it serves.
            let mut progress = |p: demo::Progress| {
                if p.day % 10 == 0 || p.day == p.days {
                    announce(&format!(
                        "journaling the demo: day {} of {}, {} views so far",
                        p.day, p.days, p.hits
                    ));
                }
            };
            let report = demo::generate_reporting(
                &store,
                app.journal().appender(),
                &options,
                chrono::Utc::now(),
                true,
                &mut progress,
            )
            .await?;
            // The site is new to the app's directory: known at once, not
            // at its next refresh.
            app.ingest().directory.reload(&store).await?;
            if !report.skipped {
                announce(&format!(
                    "journaled {} demo views over 30 days for {} (applied as they were journaled; the last within seconds)",
                    report.hits, report.site.domain
                ));
            }
        }
        settings.listen.set_port(app.port());
        let public = public_url_or(settings.public_url.as_deref(), settings.listen);
        // Said once, on the console with the other start-up lines: a log
        // line as well would show it twice to whoever runs `serve`.
        if let Some(warning) = snippets::url_warning(&public) {
            announce(&format!("warning: {warning}"));
        }
        announce(&format!("tickertape listening on http://{}", settings.listen));
        announce(&format!("embed snippets use {public} (set TICKERTAPE_PUBLIC_URL to change)"));
        match first_admin {
            Some(FirstLogin::Password { email, password, until }) => announce(&format!(
                "first run: log in at {public}/login as {email} with password {password} (one-time, only to choose your own; it works until {}, and each start prints a new one until you have chosen yours)",
                until.format("%Y-%m-%d %H:%M UTC")
            )),
            Some(FirstLogin::Expired(email)) => announce(&format!(
                "the first admin's one-time password expired unused: `tickertape user reset-login --email {email}` prints a new one"
            )),
            None => {}
        }
        app.run_until_stopped().await
    }
    .await;
    if let Some(db) = local {
        let _ = std::fs::remove_file(local_uri_file(&settings.local_db));
        stop_local(db).await;
    }
    result
}
