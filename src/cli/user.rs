//! `tickertape user …`.

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{with_store, DatabaseArgs};
use crate::accounts::password::NewPassword;
use crate::accounts::{users, Role};
use crate::domain::Email;

#[derive(Subcommand)]
pub(super) enum UserCommand {
    /// Add a user; the password is read from the first line of stdin.
    Add(AddUser),
    /// Give a user a new one-time password (printed; it works for 7 days,
    /// only to choose their own), turn off their two-factor login and end
    /// their sessions and API tokens: the way back in for a locked-out admin.
    ResetLogin(ResetLogin),
}

pub(super) async fn add_user(args: AddUser) -> anyhow::Result<()> {
    let AddUser { email, admin, db } = args;
    let email = Email::parse(&email).with_context(|| format!("--email {email:?}"))?;
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    let password =
        NewPassword::parse(line.trim_end_matches(['\n', '\r'])).context("the password on stdin")?;
    let role = if admin { Role::Admin } else { Role::Owner };
    with_store(&db, |store| async move {
        crate::indexes::ensure(&store).await?;
        let user = users::create(&store, email, &password, role, chrono::Utc::now()).await?;
        println!("{}", user.id);
        eprintln!("Added {} ({}).", user.email, role.as_str());
        Ok(())
    })
    .await
}

pub(super) async fn reset_login(args: ResetLogin) -> anyhow::Result<()> {
    let ResetLogin { email, db } = args;
    let email = Email::parse(&email).with_context(|| format!("--email {email:?}"))?;
    with_store(&db, |store| async move {
        let user = users::find_by_email(&store, &email)
            .await?
            .with_context(|| format!("no user {email}: `tickertape user add` adds one"))?;
        let password = NewPassword::generate();
        let now = chrono::Utc::now();
        users::set_one_time_password(&store, user.id, &password, now).await?;
        // As an admin's reset on the users page: whoever held the account
        // is out, and a lost second factor no longer locks the owner out.
        crate::accounts::totp::disable(&store, user.id).await?;
        crate::accounts::sessions::delete_for_user(&store, user.id, None).await?;
        crate::accounts::api_tokens::delete_for_user(&store, user.id).await?;
        println!(
            "log in as {email} with password {} (one-time: it works until {}, only to choose your own; two-factor login is off, sessions and API tokens ended)",
            password.expose(),
            (now + users::ONE_TIME_PASSWORD_LIFETIME).format("%Y-%m-%d %H:%M UTC")
        );
        Ok(())
    })
    .await
}

#[derive(Args)]
pub(super) struct AddUser {
    #[arg(long)]
    email: String,
    /// Make the user an admin (default: site owner).
    #[arg(long)]
    admin: bool,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
pub(super) struct ResetLogin {
    #[arg(long)]
    email: String,
    #[command(flatten)]
    db: DatabaseArgs,
}
