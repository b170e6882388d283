//! `tickertape serve`.

use clap::Args;

use crate::settings::Settings;

#[derive(Args)]
pub(super) struct ServeArgs {
    #[command(flatten)]
    settings: Settings,
    /// Before serving, create the demo site with 30 days of synthetic
    /// traffic unless it already has views (`make run`).
    #[arg(long)]
    demo_if_empty: bool,
}

pub(super) async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let ServeArgs {
        settings,
        demo_if_empty,
    } = args;
    crate::app::serve::serve(settings, demo_if_empty, announce).await
}

/// A start-up line on stdout. A server must not die because nobody reads
/// its console, so a closed stdout is ignored (`println!` would panic).
fn announce(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}
