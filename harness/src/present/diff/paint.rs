//! ANSI colour for diffs and reviews, off unless the output is a terminal that did not opt out.

/// ANSI colour, on only when asked (a terminal that did not opt out).
#[derive(Debug, Clone, Copy)]
pub struct Paint(pub bool);

impl Paint {
    fn wrap(self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    pub fn red(self, s: &str) -> String {
        self.wrap("31", s)
    }
    pub fn green(self, s: &str) -> String {
        self.wrap("32", s)
    }
    pub fn cyan(self, s: &str) -> String {
        self.wrap("36", s)
    }
    pub fn bold(self, s: &str) -> String {
        self.wrap("1", s)
    }
    pub fn dim(self, s: &str) -> String {
        self.wrap("2", s)
    }
    /// Colours one diff body line by its origin character.
    pub fn diff_line(self, line: &str) -> String {
        let (text, nl) = match line.strip_suffix('\n') {
            Some(t) => (t, "\n"),
            None => (line, ""),
        };
        let painted = match text.as_bytes().first() {
            Some(b'+') => self.green(text),
            Some(b'-') => self.red(text),
            Some(b'@') => self.cyan(text),
            _ => text.to_string(),
        };
        format!("{painted}{nl}")
    }
}
