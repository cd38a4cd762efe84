//! `git format-patch` mailboxes: one email per commit (author, date, subject, message, diff).
//!
//! `write` is libgit2's email (`git2::Email`, with zero commit ids, so the file does not depend
//! on where it was made), the form of `patches/NN.patch`; `parse` reads that and real
//! `git format-patch` output alike: the headers with `mailparse` (RFC 2047 words, folded
//! lines), the diff with libgit2.
use super::{date, patch};
use git2::{Diff, Email, EmailCreateOptions, Oid, Signature, Time};
use mailparse::MailHeaderMap;
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

    /// Lines added and removed by the whole commit (libgit2's diff stats).
    pub fn counts(&self) -> (usize, usize) {
        Diff::from_buffer(self.diff.as_bytes())
            .and_then(|d| d.stats())
            .map_or((0, 0), |s| (s.insertions(), s.deletions()))
    }
}

fn is_separator(line: &str) -> bool {
    line.starts_with("From ") && !line.starts_with("From:")
}

/// Splits a mailbox into its commits, oldest first.
pub fn parse(text: &str) -> Result<Vec<Commit>, MailboxError> {
    let mut commits = Vec::new();
    let mut emails = Vec::new();
    for (line, email) in split(text)? {
        let (commit, number) = read_email(line, email)?;
        emails.push(Numbered { line, number, subject: commit.subject.clone() });
        commits.push(commit);
    }
    check_numbering(&emails)?;
    Ok(commits)
}

/// Each email's text after its `From <commit> <date>` line, with that line's number.
fn split(text: &str) -> Result<Vec<(usize, &str)>, MailboxError> {
    // (line number, where the separator starts, where the email after it starts)
    let mut seps: Vec<(usize, usize, usize)> = Vec::new();
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if is_separator(line) {
            seps.push((i + 1, offset, offset + line.len()));
        } else if seps.is_empty() && !line.trim().is_empty() {
            let what = format!(
                "expected the `From <commit> <date>` line that starts a patch email, found {:?}",
                line.trim_end()
            );
            return Err(MailboxError { line: i + 1, what });
        }
        offset += line.len();
    }
    let ends = seps.iter().skip(1).map(|&(_, sep, _)| sep).chain([text.len()]);
    Ok(seps.iter().zip(ends).map(|(&(line, _, start), end)| (line, &text[start..end])).collect())
}

/// The byte offset of each line of `text`.
fn line_starts(text: &str) -> impl Iterator<Item = usize> + '_ {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1).filter(|&i| i < text.len()))
}

/// One email (its separator on mailbox line `line`) as a commit and its `[PATCH k/N]`.
fn read_email(line: usize, email: &str) -> Result<(Commit, Option<(usize, usize)>), MailboxError> {
    let err = |at: usize, what: String| MailboxError { line: at, what };
    let (headers, body_at) = mailparse::parse_headers(email.as_bytes())
        .map_err(|e| err(line + 1, format!("bad email header: {e}")))?;
    let header = |name: &str| headers.get_first_value(name);
    let (Some(author), Some(date), Some(subject)) =
        (header("From"), header("Date"), header("Subject"))
    else {
        return Err(err(line, "a patch email needs From:, Date: and Subject: headers".into()));
    };
    let (subject, number) = split_patch_tag(&subject);
    let rest = &email[body_at..];
    let Some(diff_at) = line_starts(rest).find(|&i| rest[i..].starts_with("diff --git ")) else {
        return Err(err(line, format!("patch email {subject:?} has no diff")));
    };
    // The message runs to `---` (before the diffstat) or to the diff.
    let message = &rest[..diff_at];
    let body: String =
        message.split_inclusive('\n').take_while(|l| l.trim_end() != "---").collect();
    let diff_line = line + email[..body_at + diff_at].matches('\n').count() + 1;
    let diff = patch::leading(&rest[diff_at..]).map_err(|e| {
        err(diff_line + e.line().map_or(0, |l| l - 1), format!("commit {subject:?}: {e}"))
    })?;
    let commit = Commit { author, date, subject, body: body.trim().to_string(), diff };
    Ok((commit, number))
}

/// Where an email starts, and its `[PATCH k/N]` number.
struct Numbered {
    line: usize,
    number: Option<(usize, usize)>,
    subject: String,
}

/// The subjects count the commits (`[PATCH k/N]`), so a mailbox cut at a commit boundary, or
/// one with a commit too many, is caught: every email must be numbered 1..N in order, N of them.
/// A mailbox whose subjects carry no numbers at all is taken as it is.
fn check_numbering(emails: &[Numbered]) -> Result<(), MailboxError> {
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

/// Writes commits as one mailbox of libgit2's emails (`git format-patch --zero-commit`'s form).
pub fn write(commits: &[Commit]) -> Result<String, git2::Error> {
    let mut s = String::new();
    for (k, c) in commits.iter().enumerate() {
        let (name, email) = c.author_parts();
        let (seconds, offset) = c.time().ok_or_else(|| {
            git2::Error::from_str(&format!("commit {:?}: bad date {:?}", c.subject, c.date))
        })?;
        let author = Signature::new(name, email, &Time::new(seconds, offset))?;
        let diff = Diff::from_buffer(c.diff.as_bytes())?;
        let mut opts = EmailCreateOptions::new();
        let email = Email::from_diff(
            &diff,
            k + 1,
            commits.len(),
            &Oid::ZERO_SHA1,
            c.subject.as_str(),
            c.body.as_str(),
            &author,
            &mut opts,
        )?;
        s.push_str(&String::from_utf8_lossy(email.as_slice()));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_tags_number_the_commits() {
        assert_eq!(split_patch_tag("[PATCH v2 2/3] Tune lr"), ("Tune lr".into(), Some((2, 3))));
        assert_eq!(split_patch_tag("[PATCH] x"), ("x".into(), Some((1, 1))));
        assert_eq!(split_patch_tag("[RFC] x"), ("[RFC] x".into(), None));
    }
}
