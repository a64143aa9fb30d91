//! `srun --multi-prog`: each task's own command, which SPANK does not give. slurmstepd
//! hands the plugin the step's `argv` (`S_JOB_ARGV`): the configuration file's name and
//! then its whole text, from which it picks each task's line by rank itself
//! (`multi_prog_get_argv`, slurmstepd/multi_prog.c). The plugin reads the same text the
//! same way, so that a site default stays out of a context that runs binder's wrapper, as
//! it does for a plain step's (#63: both contexts of a two-shape step ran on CPU 0).

/// srun's long option, which getopt also takes abbreviated (`--multi`).
const OPTION: &str = "--multi-prog";

/// The mark `slurm_spank_local_user_init` leaves in srun's environment (which srun hands
/// to the step) when srun was given `--multi-prog`: then `S_JOB_ARGV[1]` is the file's
/// text, not the command's first argument.
pub const MARK: &str = "BINDER_SPANK_MULTI_PROG";

/// Whether srun's own arguments (`/proc/self/cmdline` in srun) ask for `--multi-prog`
/// (any unambiguous abbreviation from `--multi` on).
pub fn asked(srun_argv: &[String]) -> bool {
    srun_argv
        .iter()
        .skip(1)
        .any(|a| a.len() >= "--multi".len() && OPTION.starts_with(a.as_str()))
}

/// The first two words of the command of task `rank` (its global rank) in the
/// configuration `text`, as slurmstepd reads them: whole-line `#` comments and blank lines
/// skipped, a line ending in `\` continued, ranks as `*`, `N` or `N-M` joined by commas,
/// `'…'` quoting, `\` escapes, `%t` (the rank) and `%o` (its offset in its line's ranks).
/// `None` when no line is this task's or a line is malformed (slurmstepd then fails the
/// step itself).
pub fn command(text: &str, rank: u32) -> Option<Vec<String>> {
    let mut continued = false;
    let lines: Vec<&str> = text.split('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        let was_continued = continued;
        continued = line.ends_with('\\');
        if was_continued {
            continue;
        }
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (spec, args) = line.split_once(char::is_whitespace)?;
        let Some(offset) = in_range(rank, spec) else {
            continue;
        };
        // A `\` at a line's end joins the next line to the command.
        let mut args = args.to_owned();
        for next in &lines[i + 1..] {
            if !args.ends_with('\\') {
                break;
            }
            args.pop();
            args.push_str(next);
        }
        return Some(words(&args, rank, offset));
    }
    None
}

/// Task `rank`'s offset in `spec`'s ranks, where `spec` names it.
fn in_range(rank: u32, spec: &str) -> Option<u32> {
    if spec == "*" {
        return Some(rank);
    }
    let mut passed = 0u32;
    for range in spec.split(',') {
        // (slurmstepd ignores a range it cannot read, and reads the others.)
        let parsed = match range.split_once('-') {
            None => range.parse::<u32>().ok().map(|n| (n, n)),
            Some((low, high)) => low.parse::<u32>().ok().zip(high.parse::<u32>().ok()),
        };
        let Some((low, high)) = parsed else {
            continue;
        };
        if (low..=high).contains(&rank) {
            return Some(passed.saturating_add(rank - low));
        }
        passed = passed.saturating_add(high.saturating_sub(low).saturating_add(1));
    }
    None
}

/// The first two words of a line's command part.
fn words(args: &str, rank: u32, offset: u32) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = args.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    out.push(w);
                    if out.len() == 2 {
                        break;
                    }
                }
            }
            '%' => {
                let w = word.get_or_insert_with(String::new);
                match chars.next() {
                    Some('t') => w.push_str(&rank.to_string()),
                    Some('o') => w.push_str(&offset.to_string()),
                    _ => {}
                }
            }
            '\\' => {
                if let Some(next) = chars.next() {
                    word.get_or_insert_with(String::new).push(next);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                w.extend(chars.by_ref().take_while(|&q| q != '\''));
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(word);
    out.truncate(2);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_option_in_srun_s_arguments() {
        assert!(asked(&argv(&["srun", "-n2", "--multi-prog", "m.conf"])));
        assert!(asked(&argv(&["srun", "-n2", "--multi", "m.conf"])));
        assert!(!asked(&argv(&["srun", "-n2", "./app", "--mu"])));
        assert!(!asked(&argv(&["--multi-prog"])));
    }

    #[test]
    fn each_task_s_line_as_slurmstepd_reads_it() {
        // The examples of srun(1)'s MULTIPLE PROGRAM CONFIGURATION, and binder's wrapper.
        let text = "###################\n# srun multiple program configuration file\n#\n\
                    4-6       hostname\n1,7       echo  task:%t\n0,2-3     echo  offset:%o\n\n\
                    8 /usr/bin/binder shapes/a.yaml -- ./ocean\n9 'my app' x\\ y\n\
                    10 a \\\n11 b\n*  ./rest\n";
        let got = |rank| command(text, rank);
        assert_eq!(got(5), Some(argv(&["hostname"])));
        assert_eq!(got(7), Some(argv(&["echo", "task:7"])));
        assert_eq!(got(3), Some(argv(&["echo", "offset:2"])));
        assert_eq!(got(8), Some(argv(&["/usr/bin/binder", "shapes/a.yaml"])));
        assert_eq!(got(9), Some(argv(&["my app", "x y"])));
        assert_eq!(
            got(10),
            Some(argv(&["a", "11"])),
            "continued onto the next line"
        );
        // The line after a continued one is not a line of its own.
        assert_eq!(got(11), Some(argv(&["./rest"])));
        assert_eq!(got(12), Some(argv(&["./rest"])));
        assert_eq!(command("0 ./a\n", 1), None);
        assert_eq!(command("0\n", 0), None, "a line without a program");
        assert_eq!(command("x-y ./a\n", 0), None, "not a rank range");
        assert_eq!(
            command("x,0 ./a\n", 0),
            Some(argv(&["./a"])),
            "a bad range is skipped"
        );
    }
}
