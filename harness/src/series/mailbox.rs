//! `git format-patch` mailboxes: one email per commit (author, date, subject, message, diff).
//!
//! `write` is the canonical form of `patches/NN.patch` (zero commit ids, so the file does not
//! depend on where it was made); `parse` reads that and real `git format-patch` output alike.
use super::{date, patch};
use thiserror::Error;

/// A mailbox that cannot be read; `line` counts from 1 in the mailbox.
#[derive(Debug, Error, PartialEq)]
#[error("line {line}: {what}")]
pub struct MailboxError {
    pub line: usize,
    pub what: String,
}

/// One commit of a record's patch.
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    /// `Name <email>`.
    pub author: String,
    /// RFC 2822, as in the email's `Date:` header.
    pub date: String,
    pub subject: String,
    /// The message after the subject line, trimmed; may be empty.
    pub body: String,
    /// The diff text: `diff --git` lines through the last hunk.
    pub diff: String,
}

/// The upstream record a commit subject says it ports ("#31: YaRN ..." -> 31), if it names one.
pub fn upstream_number(subject: &str) -> Option<u32> {
    subject.strip_prefix('#')?.split_once(':')?.0.parse().ok()
}

impl Commit {
    /// The upstream record this commit ports, from its subject ("#k: ...").
    pub fn upstream(&self) -> Option<u32> {
        upstream_number(&self.subject)
    }

    /// The full commit message: subject, blank line, body.
    pub fn message(&self) -> String {
        if self.body.is_empty() {
            format!("{}\n", self.subject)
        } else {
            format!("{}\n\n{}\n", self.subject, self.body)
        }
    }

    /// A mailbox commit from a git commit's author and date, the given message and diff.
    pub fn from_git(c: &git2::Commit, message: &str, diff: String) -> Commit {
        let (subject, body) = Commit::split_message(message);
        let author = c.author();
        Commit {
            author: format!("{} <{}>", author.name().unwrap_or(""), author.email().unwrap_or("")),
            date: date::format(author.when().seconds(), author.when().offset_minutes()),
            subject,
            body,
            diff,
        }
    }

    /// Splits a commit message into subject and body (git's rule: the first paragraph is the
    /// subject, its lines joined by spaces).
    pub fn split_message(message: &str) -> (String, String) {
        let message = message.trim();
        let (subject, body) = message.split_once("\n\n").unwrap_or((message, ""));
        let subject = subject.lines().map(str::trim).collect::<Vec<_>>().join(" ");
        (subject, body.trim().to_string())
    }

    /// Name and email of the author.
    pub fn author_parts(&self) -> (&str, &str) {
        match self.author.rsplit_once('<') {
            Some((name, email)) => (name.trim(), email.trim_end_matches('>').trim()),
            None => (self.author.trim(), ""),
        }
    }

    /// The author date as git's (seconds, offset minutes).
    pub fn time(&self) -> Option<(i64, i32)> {
        date::parse(&self.date)
    }

    /// Lines added and removed by the whole commit.
    pub fn counts(&self) -> (usize, usize) {
        patch::parse(&self.diff)
            .map(|files| {
                files.iter().fold((0, 0), |acc, f| {
                    let (a, r) = f.counts();
                    (acc.0 + a, acc.1 + r)
                })
            })
            .unwrap_or((0, 0))
    }
}

fn is_separator(line: &str) -> bool {
    line.starts_with("From ") && !line.starts_with("From:")
}

/// Splits a mailbox into its commits, oldest first.
pub fn parse(text: &str) -> Result<Vec<Commit>, MailboxError> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let err = |i: usize, what: String| MailboxError { line: i + 1, what };
    let mut commits = Vec::new();
    let mut emails = Vec::new();
    let mut i = 0;
    while i < lines.len() && lines[i].trim().is_empty() {
        i += 1;
    }
    while i < lines.len() {
        if !is_separator(lines[i]) {
            return Err(err(i, format!("expected the `From <commit> <date>` line that starts a patch email, found {:?}", lines[i].trim_end())));
        }
        let start = i;
        i += 1;
        let mut headers: Vec<(String, String)> = Vec::new();
        while let Some(l) = lines.get(i).filter(|l| !l.trim_end_matches(['\r', '\n']).is_empty()) {
            if l.starts_with([' ', '\t']) {
                let Some(last) = headers.last_mut() else {
                    return Err(err(i, "a continuation line before any header".into()));
                };
                last.1.push(' ');
                last.1.push_str(l.trim());
            } else if let Some((name, value)) = l.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            } else {
                return Err(err(i, format!("bad email header {:?}", l.trim_end())));
            }
            i += 1;
        }
        let header =
            |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| decode_words(v));
        let (Some(author), Some(date), Some(subject)) =
            (header("from"), header("date"), header("subject"))
        else {
            return Err(err(start, "a patch email needs From:, Date: and Subject: headers".into()));
        };
        let (subject, number) = split_patch_tag(&subject);
        i += 1;
        let mut body = String::new();
        while let Some(&l) = lines.get(i) {
            if l.trim_end() == "---" || l.starts_with("diff --git ") {
                break;
            }
            body.push_str(l);
            i += 1;
        }
        // Skip the diffstat between `---` and the diff.
        while lines.get(i).is_some_and(|l| !l.starts_with("diff --git ") && !is_separator(l)) {
            i += 1;
        }
        if !lines.get(i).is_some_and(|l| l.starts_with("diff --git ")) {
            return Err(err(start, format!("patch email {:?} has no diff", subject)));
        }
        let (_, used) = patch::parse_files(&lines[i..]).map_err(|e| match e {
            patch::PatchError::Malformed { line, what } => err(i + line - 1, what),
            other => err(i, other.to_string()),
        })?;
        let diff = lines[i..i + used].concat();
        i += used;
        // The signature (`-- ` and git's version) runs to the next email.
        while lines.get(i).is_some_and(|l| !is_separator(l)) {
            i += 1;
        }
        emails.push(Email { line: start + 1, number, subject: subject.clone() });
        commits.push(Commit { author, date, subject, body: body.trim().to_string(), diff });
    }
    check_numbering(&emails)?;
    Ok(commits)
}

/// Where an email starts, and its `[PATCH k/N]` number.
struct Email {
    line: usize,
    number: Option<(usize, usize)>,
    subject: String,
}

/// The subjects count the commits (`[PATCH k/N]`), so a mailbox cut at a commit boundary, or
/// one with a commit too many, is caught: every email must be numbered 1..N in order, N of them.
/// A mailbox whose subjects carry no numbers at all is taken as it is.
fn check_numbering(emails: &[Email]) -> Result<(), MailboxError> {
    let Some(total) = emails.iter().find_map(|e| e.number.map(|(_, n)| n)) else {
        return Ok(());
    };
    let err = |line: usize, what: String| Err(MailboxError { line, what });
    for (i, e) in emails.iter().enumerate() {
        let Some((k, n)) = e.number else {
            return err(
                e.line,
                format!(
                    "commit {:?} has no [PATCH k/{total}] number though the other emails do",
                    e.subject
                ),
            );
        };
        if n != total {
            return err(e.line, format!("[PATCH {k}/{n}] {:?} is numbered out of {n} but the first email counts {total} commits", e.subject));
        }
        if k > total {
            return err(
                e.line,
                format!(
                    "[PATCH {k}/{n}] {:?} is an extra commit: the subjects count {total}",
                    e.subject
                ),
            );
        }
        if k > i + 1 {
            return err(
                e.line,
                format!(
                    "commit {}/{total} is missing: [PATCH {k}/{n}] {:?} follows commit {i}",
                    i + 1,
                    e.subject
                ),
            );
        }
        if k < i + 1 {
            return err(e.line, format!("[PATCH {k}/{n}] {:?} comes again or out of order, after commit {i}/{total}: an extra commit", e.subject));
        }
    }
    if emails.len() < total {
        let last = &emails[emails.len() - 1];
        return err(
            last.line,
            format!(
                "the mailbox ends after [PATCH {}/{total}] {:?}: commit {}/{total} is missing (the patch was cut short)",
                emails.len(),
                last.subject,
                emails.len() + 1
            ),
        );
    }
    Ok(())
}

/// `[PATCH 2/3] Tune lr` → (`Tune lr`, 2 of 3); a lone `[PATCH]` is 1 of 1.
fn split_patch_tag(subject: &str) -> (String, Option<(usize, usize)>) {
    let Some((tag, rest)) = subject.strip_prefix('[').and_then(|r| r.split_once(']')) else {
        return (subject.trim().to_string(), None);
    };
    if !tag.contains("PATCH") {
        return (subject.trim().to_string(), None);
    }
    let number = match tag.split_whitespace().last().and_then(|w| w.split_once('/')) {
        Some((k, n)) => k.parse().ok().zip(n.parse().ok()),
        None => Some((1, 1)),
    };
    (rest.trim().to_string(), number)
}

/// Decodes RFC 2047 `=?UTF-8?q?...?=` words, which git uses for non-ASCII names and subjects.
fn decode_words(value: &str) -> String {
    let mut out = Vec::new();
    let mut rest = value;
    let mut after_word = false;
    while let Some(start) = rest.find("=?") {
        // charset?encoding?text?= : the text may itself start with '=' ("=23" is '#'), so the
        // closing "?=" is looked for only after the second '?'.
        let mut parts = rest[start + 2..].splitn(3, '?');
        let (_, enc, body) = (parts.next(), parts.next(), parts.next());
        let (Some(enc), Some((text, tail))) = (enc, body.and_then(|b| b.split_once("?="))) else {
            break;
        };
        if !enc.eq_ignore_ascii_case("q") {
            break;
        }
        // Whitespace between two encoded words is dropped, as RFC 2047 says.
        let gap = &rest[..start];
        if !(after_word && gap.trim().is_empty()) {
            out.extend_from_slice(gap.as_bytes());
        }
        let b = text.as_bytes();
        let mut k = 0;
        while k < b.len() {
            match b[k] {
                b'_' => out.push(b' '),
                b'=' => {
                    let hex = text.get(k + 1..k + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
                    match hex {
                        Some(v) => {
                            out.push(v);
                            k += 2;
                        }
                        None => out.push(b'='),
                    }
                }
                c => out.push(c),
            }
            k += 1;
        }
        after_word = true;
        rest = tail;
    }
    out.extend_from_slice(rest.as_bytes());
    String::from_utf8_lossy(&out).into_owned()
}

/// Encodes a header value as one RFC 2047 word when it is not plain ASCII.
fn encode_word(value: &str) -> String {
    if value.is_ascii() {
        return value.to_string();
    }
    let mut s = String::from("=?UTF-8?q?");
    for &b in value.as_bytes() {
        match b {
            b' ' => s.push('_'),
            b'a'..=b'z'
            | b'A'..=b'Z'
            | b'0'..=b'9'
            | b'.'
            | b','
            | b'-'
            | b'@'
            | b'/'
            | b'('
            | b')' => s.push(b as char),
            _ => s.push_str(&format!("={b:02X}")),
        }
    }
    s.push_str("?=");
    s
}

/// A `git diff --stat`-style summary of a diff text.
fn diffstat(diff: &str) -> String {
    let files = patch::parse(diff).unwrap_or_default();
    let width = files.iter().map(|f| f.path().len()).max().unwrap_or(0);
    let counts: Vec<(usize, usize)> = files.iter().map(patch::FilePatch::counts).collect();
    let most = counts.iter().map(|(a, r)| a + r).max().unwrap_or(0);
    let num_width = most.to_string().len();
    let scale = |n: usize| {
        if most > 50 {
            (n * 50).div_ceil(most)
        } else {
            n
        }
    };
    let mut s = String::new();
    for (f, (a, r)) in files.iter().zip(&counts) {
        let bar = format!("{}{}", "+".repeat(scale(*a)), "-".repeat(scale(*r)));
        s.push_str(
            &format!(" {:<width$} | {:>num_width$} {bar}\n", f.path(), a + r).replace(" \n", "\n"),
        );
    }
    let (adds, dels) = counts.iter().fold((0, 0), |acc, c| (acc.0 + c.0, acc.1 + c.1));
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    s.push_str(&format!(" {}", plural(files.len(), "file changed", "files changed")));
    if adds > 0 {
        s.push_str(&format!(", {}(+)", plural(adds, "insertion", "insertions")));
    }
    if dels > 0 {
        s.push_str(&format!(", {}(-)", plural(dels, "deletion", "deletions")));
    }
    s.push('\n');
    s
}

/// Writes commits as one mailbox, in the form `git format-patch --zero-commit` uses.
pub fn write(commits: &[Commit]) -> String {
    let n = commits.len();
    let mut s = String::new();
    for (k, c) in commits.iter().enumerate() {
        let tag = if n == 1 { "[PATCH]".to_string() } else { format!("[PATCH {}/{n}]", k + 1) };
        s.push_str("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n");
        s.push_str(&format!("From: {}\nDate: {}\n", encode_word(&c.author), c.date));
        s.push_str(&format!("Subject: {tag} {}\n", encode_word(&c.subject)));
        if !(c.body.is_ascii() && c.diff.is_ascii()) {
            s.push_str("MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n");
        }
        s.push('\n');
        if !c.body.is_empty() {
            s.push_str(&c.body);
            s.push('\n');
        }
        s.push_str("---\n");
        s.push_str(&diffstat(&c.diff));
        s.push('\n');
        s.push_str(&c.diff);
        s.push_str("-- \nrecords\n\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_encodes_header_words() {
        assert_eq!(decode_words("=?UTF-8?q?J=C3=BCrgen_M?= <j@x.org>"), "Jürgen M <j@x.org>");
        assert_eq!(decode_words("=?UTF-8?q?a?= =?UTF-8?q?b?="), "ab");
        let subject = "=?UTF-8?q?=2338=3A_Polar_Express_replaces_Newton=E2=80=93Schulz?=";
        assert_eq!(decode_words(subject), "#38: Polar Express replaces Newton–Schulz");
        assert_eq!(decode_words(&encode_word("Jürgen <j@x.org>")), "Jürgen <j@x.org>");
        assert_eq!(split_patch_tag("[PATCH v2 2/3] Tune lr"), ("Tune lr".into(), Some((2, 3))));
        assert_eq!(split_patch_tag("[PATCH] x"), ("x".into(), Some((1, 1))));
        assert_eq!(split_patch_tag("[RFC] x"), ("[RFC] x".into(), None));
    }

    #[test]
    fn diffstat_reads_like_git() {
        let diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-a\n+b\n+c\n";
        assert_eq!(diffstat(diff), " x | 3 ++-\n 1 file changed, 2 insertions(+), 1 deletion(-)\n");
    }
}
