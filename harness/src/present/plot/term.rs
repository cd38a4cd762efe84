//! Charts in the terminal: braille lines by textplots, sized to the terminal's width. Nothing
//! is drawn when stdout is not a terminal or the user asked for no plot.
use super::{svg, Chart};
use std::fmt::Write;
use std::io::IsTerminal;
use textplots::{Chart as Canvas, ColorPlot, LabelBuilder, LabelFormat, Shape};

/// The columns to draw in when stdout is a terminal and `enabled`: the terminal's width, else
/// (a terminal that reports no size) `COLUMNS` or 80.
pub fn width(enabled: bool) -> Option<usize> {
    let stdout = std::io::stdout();
    if !enabled || !stdout.is_terminal() {
        return None;
    }
    let columns = || std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok());
    Some(
        terminal_size::terminal_size_of(stdout)
            .map(|(w, _)| w.0 as usize)
            .or_else(columns)
            .unwrap_or(80),
    )
}

/// Prints `charts` when stdout is a terminal and `enabled` (not `--no-plot`), in colour unless
/// NO_COLOR is set.
pub fn print(charts: &[Chart], enabled: bool) {
    let Some(cols) = width(enabled) else {
        return;
    };
    let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    for c in charts {
        println!("\n{}", render(c, cols, colour));
    }
}

/// `chart` in `cols` terminal columns (at least 40): the curves and the target lines in colour
/// when `colour`, the axis ends as numbers, and a key below that names the axes and curves.
pub fn render(chart: &Chart, cols: usize, colour: bool) -> String {
    let (x0, x1, y0, y1) = bounds(chart);
    // Braille: 2 dots per column, 4 per row; the y labels take the columns on the right.
    let dots_w = (2 * cols.saturating_sub(10)).max(64) as u32;
    let dots_h = 48;
    let target_lines: Vec<Vec<(f32, f32)>> =
        chart.targets.iter().map(|t| vec![(x0, t.loss as f32), (x1, t.loss as f32)]).collect();
    let curves: Vec<Vec<(f32, f32)>> = chart
        .curves
        .iter()
        .map(|c| c.points.iter().map(|&(x, y)| (x as f32, y as f32)).collect())
        .collect();
    let shapes: Vec<(Shape, [u8; 3])> = target_lines
        .iter()
        .map(|p| (Shape::Lines(p), rgb(svg::TARGET)))
        .chain(
            curves
                .iter()
                .enumerate()
                .map(|(i, p)| (Shape::Lines(p), rgb(svg::PALETTE[i % svg::PALETTE.len()]))),
        )
        .collect();
    let mut canvas = Canvas::new_with_y_range(dots_w, dots_h, x0, x1, y0, y1);
    let drawn = shapes
        .iter()
        .fold(&mut canvas, |c, (s, [r, g, b])| c.linecolorplot(s, (*r, *g, *b).into()))
        .x_label_format(LabelFormat::Custom(Box::new(|v| format!("{v:.0}"))))
        .y_label_format(LabelFormat::Custom(Box::new(|v| format!("{v:.2}"))));
    drawn.axis();
    drawn.figures();
    let mut out = drawn.to_string();
    if !colour {
        out = strip_ansi(&out);
    }
    let _ = writeln!(out, "{}\nx: {}, y: {}", chart.title, chart.x_label(), chart.y_label());
    let key: Vec<String> = chart
        .targets
        .iter()
        .map(|t| paint(colour, svg::TARGET, &format!("── {}", t.label)))
        .chain(chart.curves.iter().enumerate().map(|(i, c)| {
            paint(colour, svg::PALETTE[i % svg::PALETTE.len()], &format!("── {}", c.label))
        }))
        .collect();
    for k in key {
        let _ = writeln!(out, "{k}");
    }
    if let Some(note) = &chart.x_note {
        let _ = writeln!(out, "{note}");
    }
    out
}

fn bounds(chart: &Chart) -> (f32, f32, f32, f32) {
    let pts = chart.curves.iter().flat_map(|c| &c.points);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if chart.x.from_zero() {
        x0 = 0.0;
    }
    for t in &chart.targets {
        (y0, y1) = (y0.min(t.loss), y1.max(t.loss));
    }
    let pad = ((y1 - y0) * 0.04).max(1e-3);
    (x0 as f32, x1.max(x0 + 1.0) as f32, (y0 - pad) as f32, (y1 + pad) as f32)
}

fn rgb(c: plotters::style::RGBColor) -> [u8; 3] {
    [c.0, c.1, c.2]
}

fn paint(colour: bool, c: plotters::style::RGBColor, s: &str) -> String {
    if colour {
        format!("\x1b[38;2;{};{};{}m{s}\x1b[0m", c.0, c.1, c.2)
    } else {
        s.to_string()
    }
}

/// Removes ANSI escape sequences (textplots colours every dot it draws).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::present::plot::{Curve, Source, Target, XAxis, YAxis};

    fn chart() -> Chart {
        Chart {
            title: "#9 official val loss".into(),
            x: XAxis::Step,
            y: YAxis::ValLoss,
            source: Source::Official,
            curves: vec![Curve {
                label: "#9 test".into(),
                points: vec![(0.0, 10.0), (50.0, 4.0), (100.0, 3.2)],
                markers: true,
            }],
            targets: vec![Target { label: "target 3.28".into(), loss: 3.28 }],
            x_note: None,
        }
    }

    #[test]
    fn follows_the_width_and_labels_the_axes() {
        let narrow = render(&chart(), 60, false);
        let wide = render(&chart(), 120, false);
        let longest = |s: &str| s.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(longest(&wide) > longest(&narrow) + 40, "{narrow}\n{wide}");
        assert!(longest(&narrow) <= 60, "{narrow}");
        assert!(narrow.contains("x: step (official, full scale)"), "{narrow}");
        assert!(narrow.contains("── target 3.28"), "{narrow}");
        assert!(!narrow.contains('\x1b'));
        assert!(render(&chart(), 60, true).contains('\x1b'));
        // Braille dots are drawn.
        assert!(narrow.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)), "{narrow}");
    }
}
