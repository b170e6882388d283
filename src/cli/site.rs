//! `tickertape site …`.

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{site_by_domain, with_store, DatabaseArgs};
use crate::domain::{DomainName, SiteId, SiteName, TimeZone};
use crate::settings::public_url_or;
use crate::storage::sites;
use crate::web::snippets;

#[derive(Subcommand)]
pub(super) enum SiteCommand {
    /// Add a site and print its id and the snippets to embed.
    Add(AddSite),
    /// List sites: id, domain, name, time zone and aliases, tab-separated.
    List(ListSites),
    /// Set the IANA time zone a site's reports are in.
    SetTimeZone(SetTimeZone),
    /// Set a site's own new-page cap: `default`, `none` or new pages per hour.
    SetPageCap(SetPageCap),
}

pub(super) async fn set_time_zone(args: SetTimeZone) -> anyhow::Result<()> {
    let SetTimeZone {
        domain,
        time_zone,
        db,
    } = args;
    let zone = TimeZone::parse(&time_zone).with_context(|| format!("--time-zone {time_zone:?}"))?;
    with_store(&db, |store| async move {
        let site = site_by_domain(&store, &domain).await?;
        sites::set_time_zone(&store, &site, zone).await?;
        eprintln!("{}: reports are now in {zone}.", site.domain);
        Ok(())
    })
    .await
}

pub(super) async fn set_page_cap(args: SetPageCap) -> anyhow::Result<()> {
    let SetPageCap {
        domain,
        page_cap,
        db,
    } = args;
    let cap = crate::domain::PageCapSetting::parse(&page_cap)
        .with_context(|| format!("--page-cap {page_cap:?}"))?;
    with_store(&db, |store| async move {
        let site = site_by_domain(&store, &domain).await?;
        sites::set_page_cap(&store, &site, cap).await?;
        eprintln!(
            "{}: new-page cap {cap} (serve picks it up at its next site refresh).",
            site.domain
        );
        Ok(())
    })
    .await
}

pub(super) async fn add_site(args: AddSite) -> anyhow::Result<()> {
    let AddSite {
        domain,
        aliases,
        name,
        time_zone,
        id,
        public_url,
        listen,
        db,
    } = args;
    let public_url = public_url_or(public_url.as_deref(), listen);
    let time_zone =
        TimeZone::parse(&time_zone).with_context(|| format!("--time-zone {time_zone:?}"))?;
    let domain = DomainName::parse(&domain).with_context(|| format!("--domain {domain:?}"))?;
    let name = name
        .as_deref()
        .map(SiteName::parse)
        .transpose()
        .with_context(|| format!("--name {:?}", name.as_deref().unwrap_or_default()))?
        .flatten()
        .map(SiteName::into_string);
    let id = id
        .map(|id| SiteId::parse(&id.to_ascii_lowercase()).with_context(|| format!("--id {id:?}")))
        .transpose()?;
    let aliases = aliases
        .iter()
        .map(|a| DomainName::parse(a).with_context(|| format!("--alias {a:?}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    with_store(&db, |store| async move {
        crate::indexes::ensure(&store).await?;
        let new = sites::NewSite {
            domain,
            aliases,
            name,
            owners: vec![],
            time_zone,
        };
        let by = sites::Creator::Operator { id };
        let site = sites::create(&store, new, by, chrono::Utc::now()).await?;
        let s = snippets::for_site(&public_url, &site.id);
        println!("{}", site.id);
        eprintln!(
            "Added {} ({}). Embed one of these on its pages:",
            site.domain, site.name
        );
        eprintln!("\n  Script (counts each page's path):\n    {}", s.script);
        eprintln!(
            "\n  Pixel only (no JavaScript; page from the Referer):\n    {}\n",
            s.pixel
        );
        if let Some(warning) = snippets::url_warning(&public_url) {
            eprintln!("warning: {warning}");
        }
        Ok(())
    })
    .await
}

pub(super) async fn list_sites(args: ListSites) -> anyhow::Result<()> {
    let ListSites { db } = args;
    with_store(&db, |store| async move {
        for site in sites::list(&store).await? {
            let aliases: Vec<_> = site.aliases.iter().map(|a| a.to_string()).collect();
            // The zone before the aliases: every site has one, and its
            // reports (days, "today") are counted in it.
            println!(
                "{}\t{}\t{}\t{}\t{}",
                site.id,
                site.domain,
                site.name,
                site.time_zone,
                aliases.join(",")
            );
        }
        Ok(())
    })
    .await
}

#[derive(Args)]
pub(super) struct AddSite {
    /// The site's canonical domain, e.g. example.com.
    #[arg(long)]
    domain: String,
    /// Another host whose pages count for this site (repeatable).
    #[arg(long = "alias")]
    aliases: Vec<String>,
    /// A display name (default: the domain).
    #[arg(long = "name", id = "site_name")]
    name: Option<String>,
    /// The IANA time zone of its reports, e.g. Europe/Berlin.
    #[arg(long, default_value = "UTC")]
    time_zone: String,
    /// The site's id (a UUID) instead of a new one: an Umami website id,
    /// so that the snippets' `data-website-id` stays as it is.
    #[arg(long)]
    id: Option<String>,
    /// The URL browsers reach Tickertape at, for the snippets (default:
    /// `http://` + the listen address, as `serve` does).
    #[arg(long, env = "TICKERTAPE_PUBLIC_URL")]
    public_url: Option<String>,
    /// The address `serve` listens on; used for the snippets when no
    /// public URL is set, so they match what `serve` prints.
    #[arg(long, env = "TICKERTAPE_LISTEN", default_value = "127.0.0.1:8000")]
    listen: std::net::SocketAddr,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
pub(super) struct ListSites {
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
pub(super) struct SetTimeZone {
    /// The site's domain.
    #[arg(long)]
    domain: String,
    /// e.g. Europe/Berlin, Asia/Kolkata, UTC.
    #[arg(long)]
    time_zone: String,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
pub(super) struct SetPageCap {
    /// The site's domain.
    #[arg(long)]
    domain: String,
    /// `default` (the instance's budgets), `none`, or new pages per hour.
    #[arg(long)]
    page_cap: String,
    #[command(flatten)]
    db: DatabaseArgs,
}
