//! How every command prints: one JSON line with `--json`, else the result's
//! text. A closed stdout (`dingo fs stat x | head -1`) ends the command
//! quietly instead of panicking.

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

/// Prints `value` as one JSON line if `json`, else as its text.
pub fn print<T: Serialize + Display>(value: &T, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        return json(value);
    }
    write_stdout(format_args!("{value}"));
    Ok(())
}
