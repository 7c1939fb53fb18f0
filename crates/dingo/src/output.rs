//! How every command prints: one JSON line with `--json`, else the result's
//! text. A closed stdout (`dingo fs stat x | head -1`) ends the command
//! quietly instead of panicking. Progress goes to stderr, as a bar only
//! when stderr is a terminal.

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::fmt::Display;
use std::io::Write as _;

/// `println!` through [`write_stdout`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes to stdout and flushes; exits with success if stdout is a closed pipe.
pub fn write_stdout(text: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(text).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        panic!("cannot write to stdout: {e}");
    }
}

/// Prints `value` as one JSON line.
pub fn json(value: &impl Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// Prints `value` as one JSON line if `json`, else as its text, ended by
/// one newline.
pub fn print<T: Serialize + Display>(value: &T, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        return json(value);
    }
    let text = value.to_string();
    let end = if text.ends_with('\n') { "" } else { "\n" };
    write_stdout(format_args!("{text}{end}"));
    Ok(())
}

/// What the experiment commands (`demo`, `bench ...`) share: the short
/// form of the run, and how the report is printed.
#[derive(clap::Args, Debug)]
pub struct ExperimentArgs {
    /// The short form of the run (what CI runs; the command's help says
    /// how short).
    #[arg(long)]
    pub quick: bool,
    /// Print the report as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

impl ExperimentArgs {
    /// Prints `report` as these flags ask.
    pub fn show<T: Serialize + Display>(&self, report: &T) -> anyhow::Result<()> {
        print(report, self.json)
    }
}

/// A progress bar on stderr over `len` (a spinner if unknown) drawn with
/// indicatif's `template`; hidden when stderr is not a terminal.
pub fn progress_bar(len: Option<u64>, template: &str) -> ProgressBar {
    use std::io::IsTerminal as _;
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(template).expect("valid template").progress_chars("=> ");
    match len {
        Some(len) => ProgressBar::new(len),
        None => ProgressBar::new_spinner(),
    }
    .with_style(style)
}
