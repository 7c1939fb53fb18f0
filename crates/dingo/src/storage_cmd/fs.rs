//! `dingo fs put|get|ls|rm|stat`: file operations through the client.

use anyhow::Result;
use clap::Subcommand;
use dingo_client::{ClientConfig, FileView, Listing, PutOptions};
use dingo_daemon::{keep_freed_memory, shutdown_signal};
use dingo_types::format_bytes;
use indicatif::ProgressBar;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum FsCommand {
    /// Store a local file (`-` for stdin), streaming it in bounded memory.
    /// Interrupted (Ctrl-C, SIGTERM) or failed, it removes what it wrote.
    Put {
        /// Local file, or `-` for stdin.
        local: PathBuf,
        /// Path in the store, e.g. /data/file.
        path: String,
        #[command(flatten)]
        options: PutOptions,
        #[command(flatten)]
        client: ClientConfig,
    },
    /// Read a file, or a range of it, to a local file or stdout (`-`). A
    /// local file is replaced only once all of it was read.
    Get {
        path: String,
        #[arg(default_value = "-")]
        local: PathBuf,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Bytes to read [default: to the end].
        #[arg(long)]
        len: Option<u64>,
        /// Read a file that is still open (only its committed bytes).
        #[arg(long)]
        open: bool,
        #[command(flatten)]
        client: ClientConfig,
    },
    /// List files under a prefix.
    Ls {
        #[arg(default_value = "/")]
        prefix: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientConfig,
    },
    /// Delete a file (also an open one).
    Rm {
        path: String,
        #[command(flatten)]
        client: ClientConfig,
    },
    /// Show a file's blocks and their chunk locations.
    Stat {
        path: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientConfig,
    },
    /// Lease recovery: close an open file whose writer is gone, sealing it
    /// at its last committed length, or removing it if nothing was
    /// committed. Refused while the lease is live unless --force.
    Recover {
        path: String,
        /// Recover even though the writer's lease has not expired.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        client: ClientConfig,
    },
}

/// A progress bar on stderr for `total` bytes (a spinner if unknown).
fn progress_bar(total: Option<u64>, what: &str) -> ProgressBar {
    let template = match total {
        Some(_) => "{msg} [{bar:30}] {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}",
        None => "{msg} {spinner} {decimal_bytes} {decimal_bytes_per_sec}",
    };
    let bar = crate::output::progress_bar(total, template);
    bar.set_message(what.to_string());
    bar
}

/// Exits quietly when stdout was closed under us (`dingo fs get x | head`).
fn quiet_on_closed_pipe(e: dingo_client::ClientError) -> anyhow::Error {
    if let dingo_client::ClientError::Output(io) = &e
        && io.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
    e.into()
}

pub async fn run_fs(cmd: FsCommand) -> Result<()> {
    keep_freed_memory();
    match cmd {
        FsCommand::Put { local, path, options, client } => {
            let client = client.connect()?;
            let (reader, total) = dingo_client::open_local(&local).await?;
            let bar = progress_bar(total, &path);
            let put = client.put_from(&path, &options, reader, |n| bar.set_position(n), shutdown_signal()).await;
            let size = put.inspect_err(|_| bar.abandon())?;
            bar.finish_and_clear();
            outln!("{path}: {} stored ({})", format_bytes(size), options.redundancy);
        }
        FsCommand::Get { path, local, offset, len, open, client } => {
            let client = client.connect()?;
            if local.as_os_str() == "-" {
                let file = client.stat_complete(&path, open).await?;
                let len = len.unwrap_or_else(|| file.size.saturating_sub(offset));
                let mut out = std::io::stdout().lock();
                client.read_to(&file, offset, len, &mut out, |_| {}).await.map_err(quiet_on_closed_pipe)?;
            } else {
                let bar = progress_bar(None, &path);
                client.download(&path, &local, offset, len, open, |n| bar.set_position(n)).await?;
                bar.finish_and_clear();
            }
        }
        FsCommand::Ls { prefix, json, client } => {
            let files = client.connect()?.list(&prefix).await?;
            crate::output::print(&Listing::new(&files, dingo_daemon::now_ms()), json)?;
        }
        FsCommand::Rm { path, client } => {
            let blocks = client.connect()?.delete(&path).await?;
            outln!("{path}: deleted ({blocks} block(s))");
        }
        FsCommand::Recover { path, force, client } => match client.connect()?.recover(&path, force).await? {
            Some(size) => outln!("{path}: sealed at {} ({size} bytes committed)", format_bytes(size)),
            None => outln!("{path}: removed (nothing had been committed)"),
        },
        FsCommand::Stat { path, json, client } => {
            let file = client.connect()?.stat(&path).await?;
            crate::output::print(&FileView::new(&file, dingo_daemon::now_ms(), true), json)?;
        }
    }
    Ok(())
}
