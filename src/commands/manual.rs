//! What a packager ships beside the binary, generated from the command line's own clap
//! definition so it never drifts from the flags: shell completions (`callbackd completions
//! bash|zsh|fish`) and the man page (`callbackd man`, roff on stdout).
//!
//! The man page is printed by the binary rather than checked in as a generated file: it
//! always matches the binary that prints it, needs no build script, and a package build runs
//! `callbackd man > callbackd.1` the same way it runs `callbackd completions bash`.

use std::io::{self, Write};

use clap::CommandFactory;

use callbackd::cli::Cli;

/// The shells `callbackd completions` writes scripts for.
pub use clap_complete::Shell;

/// Writes the completion script for `shell` to `out`. Made in memory first:
/// `clap_complete` panics when a write fails, and a closed stdout is no reason to panic.
pub fn completions(shell: Shell, out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "callbackd", &mut script);
    out.write_all(&script)
}

/// Writes the man page (section 1, roff) to `out`: every subcommand's options follow the
/// main page's, as `man callbackd` readers expect to find them.
pub fn man_page(out: &mut dyn Write) -> io::Result<()> {
    let cmd = Cli::command();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    // clap_mangen's own list names a page per subcommand (`callbackd-serve(1)`), which this
    // page does not come with: each subcommand is a section below instead, and the list says
    // so.
    writeln!(out, ".SH SUBCOMMANDS")?;
    writeln!(
        out,
        "Each is described in its own section below (\\fBCALLBACKD SERVE\\fR, ...)."
    )?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        writeln!(out, ".TP\n\\fBcallbackd {}\\fR", sub.get_name())?;
        if let Some(about) = sub.get_about() {
            writeln!(out, "{}", roff_text(&about.to_string()))?;
        }
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("callbackd {}", sub.get_name());
        writeln!(out, ".SH \"{}\"", name.to_uppercase())?;
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            writeln!(out, "{}", roff_text(&about.to_string()))?;
        }
        // Its synopsis and options as subsections of its own section.
        let sub_man = clap_mangen::Man::new(sub.clone().bin_name(name));
        let mut part = Vec::new();
        sub_man.render_synopsis_section(&mut part)?;
        sub_man.render_options_section(&mut part)?;
        out.write_all(
            String::from_utf8_lossy(&part)
                .replace("\n.SH ", "\n.SS ")
                .as_bytes(),
        )?;
    }
    man.render_version_section(out)?;
    Ok(())
}

/// Plain text as one roff paragraph: a leading `.` or `'` would be read as a request.
fn roff_text(text: &str) -> String {
    text.lines()
        .map(|l| {
            let l = l.replace('\\', "\\e");
            if l.starts_with(['.', '\'']) {
                format!("\\&{l}")
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_gets_a_script_naming_the_subcommands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut out = Vec::new();
            completions(shell, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            for word in ["sessions", "prune", "completions", "--older-than"] {
                assert!(text.contains(word), "{shell}: {word} missing");
            }
        }
    }

    #[test]
    fn the_man_page_names_no_page_it_does_not_come_with() {
        let mut out = Vec::new();
        man_page(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("(1)"), "a reference to another page");
        assert!(text.contains(".SH SUBCOMMANDS"));
        assert!(text.contains("\\fBcallbackd sessions\\fR"));
        assert!(text.contains(".SH \"CALLBACKD SESSIONS\""));
    }

    #[test]
    fn roff_text_never_starts_a_request() {
        assert_eq!(roff_text(".hidden\n'also"), "\\&.hidden\n\\&'also");
    }
}
