//! `tickertape email …`: sending a report now, to try the SMTP set-up and
//! to see what subscribers receive.

use clap::{Args, Subcommand, ValueEnum};

use super::{site_by_id_or_domain, with_store, DatabaseArgs};
use crate::domain::Recipient;
use crate::email::report;
use crate::settings::{public_url_or, EmailSettings};

#[derive(Subcommand)]
pub(super) enum EmailCommand {
    /// Send one report now to one address, covering the last day, 7 days
    /// or 30 days up to now (to the end of the current minute), outside
    /// any subscription and schedule; through TICKERTAPE_SMTP_URL as
    /// TICKERTAPE_SMTP_FROM.
    SendReport(SendReport),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum Length {
    /// The last 24 hours.
    Day,
    /// The last 7 days.
    Week,
    /// The last 30 days.
    Month,
}

#[derive(Args)]
pub(super) struct SendReport {
    /// The site: its id or domain.
    #[arg(long)]
    site: String,
    #[arg(long, value_enum, default_value = "week")]
    period: Length,
    /// The address to send it to.
    #[arg(long)]
    to: String,
    /// The URL the dashboard and unsubscribe links point at (default:
    /// `http://` + the listen address, as `serve` does).
    #[arg(long, env = "TICKERTAPE_PUBLIC_URL")]
    public_url: Option<String>,
    /// The address `serve` listens on; the links' when no public URL is
    /// set, so they reach the server `serve` started.
    #[arg(long, env = "TICKERTAPE_LISTEN", default_value = "127.0.0.1:8000")]
    listen: std::net::SocketAddr,
    #[command(flatten)]
    email: EmailSettings,
    #[command(flatten)]
    db: DatabaseArgs,
}

pub(super) async fn run(command: EmailCommand) -> anyhow::Result<()> {
    match command {
        EmailCommand::SendReport(args) => send_report(args).await,
    }
}

async fn send_report(args: SendReport) -> anyhow::Result<()> {
    let to = Recipient::parse(&args.to).map_err(|e| anyhow::anyhow!("--to: {e}"))?;
    let config = args.email.email_config().map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        config.enabled(),
        "set TICKERTAPE_SMTP_URL and TICKERTAPE_SMTP_FROM to send email (docs/email.md)"
    );
    let days = match args.period {
        Length::Day => 1,
        Length::Week => 7,
        Length::Month => 30,
    };
    with_store(&args.db, |store| async move {
        let site = site_by_id_or_domain(&store, &args.site).await?;
        let clock = crate::clock::system();
        let public_url = public_url_or(args.public_url.as_deref(), args.listen);
        let sender = crate::email::Sender::new(store, clock.clone(), config, public_url)
            .map_err(anyhow::Error::msg)?;
        let period = report::last_days(days, clock.now(), site.time_zone.tz());
        let sent = sender.send_report_now(&site, &period, &to).await?;
        println!(
            "sent the report of {} ({}) to {to}: {} views, {} visits",
            site.domain, sent.title, sent.now.views, sent.now.visits
        );
        Ok(())
    })
    .await
}
