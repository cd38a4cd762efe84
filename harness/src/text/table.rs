//! Tables for people and for markdown: aligned boxes on a terminal, a pipe table with
//! `--format md`. Figures are formatted by the caller (see `figures`).
use comfy_table::{presets, CellAlignment, ContentArrangement, LineStyle, TableStyle};

/// Rules above, below and under the header; none between rows.
const TEXT_STYLE: TableStyle = TableStyle::new()
    .top_border(LineStyle::none().fill('─').junction('─'))
    .header_separator(LineStyle::none().fill('─').junction('─'))
    .bottom_border(LineStyle::none().fill('─').junction('─'));

/// `s` cut to `n` characters, the last one an ellipsis where it was longer: a cell that would
/// widen a table past a terminal.
pub fn clip(s: &str, n: usize) -> String {
    match s.chars().count() > n {
        true => format!("{}…", s.chars().take(n - 1).collect::<String>()),
        false => s.to_string(),
    }
}

/// How a command prints its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned tables for a terminal.
    #[default]
    Text,
    /// Markdown: pipe tables and headings, to paste into a pull request.
    Markdown,
}

/// A table with a header row; columns after the first are right-aligned (figures), the first
/// left-aligned (labels), unless set otherwise.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    left: Vec<usize>,
}

impl Table {
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            left: vec![0],
        }
    }

    /// Column `i` holds text rather than figures: left-aligned.
    pub fn left(mut self, i: usize) -> Table {
        self.left.push(i);
        self
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn render(&self, format: Format) -> String {
        let mut t = comfy_table::Table::new();
        t.load_style(match format {
            Format::Text => TEXT_STYLE,
            Format::Markdown => presets::ASCII_MARKDOWN,
        });
        // Never wrap: a report piped to a file keeps one line per row.
        t.set_content_arrangement(ContentArrangement::Disabled);
        t.set_header(&self.header);
        for r in &self.rows {
            t.add_row(r);
        }
        for (i, col) in t.column_iter_mut().enumerate() {
            let align =
                if self.left.contains(&i) { CellAlignment::Left } else { CellAlignment::Right };
            col.set_cell_alignment(align);
        }
        let mut s = t.trim_fmt();
        if format == Format::Markdown {
            s = mark_alignment(&s, &self.left);
        }
        s.push('\n');
        s
    }
}

/// Markdown's alignment row: `---:` under right-aligned columns.
fn mark_alignment(table: &str, left: &[usize]) -> String {
    let mut lines: Vec<String> = table.lines().map(str::to_string).collect();
    if let Some(sep) = lines.get_mut(1) {
        let cells: Vec<&str> = sep.trim_matches('|').split('|').collect();
        let marked: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let dashes = "-".repeat(c.len().max(3));
                if left.contains(&i) {
                    dashes
                } else {
                    format!("{}:", &dashes[1..])
                }
            })
            .collect();
        *sep = format!("|{}|", marked.join("|"));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(["metric", "value"]);
        t.row(["runs", "3"]);
        t.row(["mean val loss", "2.4820"]);
        t
    }

    #[test]
    fn text_columns_line_up() {
        let s = sample().render(Format::Text);
        let runs = s.lines().find(|l| l.contains("runs")).unwrap();
        let loss = s.lines().find(|l| l.contains("mean val loss")).unwrap();
        // Right-aligned figures end in the same column.
        assert_eq!(runs.find('3').unwrap(), loss.rfind('0').unwrap(), "{s}");
        assert!(!s.contains('|'), "{s}");
    }

    #[test]
    fn markdown_is_a_pipe_table_with_alignment() {
        let s = sample().render(Format::Markdown);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("| metric"), "{s}");
        assert!(lines[1].starts_with("|---") && lines[1].ends_with(":|"), "{s}");
        assert!(lines[3].contains("| mean val loss") && lines[3].contains("2.4820 |"), "{s}");
    }

    #[test]
    fn a_long_cell_is_clipped_to_its_width_with_an_ellipsis() {
        assert_eq!(clip("Long context: 32,768-token rows", 8), "Long co…");
        assert_eq!(clip("é".repeat(8).as_str(), 8), "é".repeat(8));
    }
}
