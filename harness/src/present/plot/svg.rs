//! Charts as SVG text, drawn by plotters' SVG backend. Each figure also carries the axis
//! mapping plotters used (a value and its pixel at both ends of each axis), so a reader (the
//! site's tests) can turn drawn coordinates back into steps and losses.
use super::{Chart, Curve, XAxis};
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::RGBColor;
use serde::Serialize;

/// Curve colours in draw order (colour-blind safe, Okabe–Ito).
pub const PALETTE: [RGBColor; 4] =
    [RGBColor(0, 114, 178), RGBColor(230, 159, 0), RGBColor(0, 158, 115), RGBColor(204, 121, 167)];
/// The target line's colour.
pub const TARGET: RGBColor = RGBColor(213, 94, 0);

/// An SVG chart and the axis mapping it was drawn with.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub svg: String,
    /// `value pixel value pixel` for the x axis, at its two ends.
    pub x_map: String,
    /// The same for the y axis.
    pub y_map: String,
    /// The axes and the chart's caption, for the text beside it.
    pub title: String,
    pub x_label: String,
    pub note: Option<String>,
}

/// Draws `chart` into a `size` (width, height) SVG with axes, a legend and the target lines.
pub fn figure(chart: &Chart, size: (u32, u32)) -> Result<Figure> {
    let (xr, yr) = ranges(chart);
    let mut svg = String::new();
    let (x_map, y_map);
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut c = ChartBuilder::on(&root)
            .margin(12)
            .caption(&chart.title, ("sans-serif", 19))
            .x_label_area_size(46)
            .y_label_area_size(60)
            .build_cartesian_2d(xr.clone(), yr.clone())
            .map_err(err)?;
        let x_dec = match chart.x {
            XAxis::Record(_) => 0, // record numbers
            _ => decimals(xr.end - xr.start),
        };
        let y_dec = decimals(yr.end - yr.start);
        c.configure_mesh()
            .light_line_style(WHITE.mix(0.0))
            .x_desc(chart.x_label())
            .y_desc(chart.y_label())
            .x_label_formatter(&|v| format!("{v:.x_dec$}"))
            .y_label_formatter(&|v| format!("{v:.y_dec$}"))
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 15))
            .draw()
            .map_err(err)?;
        draw_lines(&mut c, chart, &xr)?;
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 15))
            .draw()
            .map_err(err)?;
        let px = |x: f64, y: f64| c.backend_coord(&(x, y));
        x_map = format!(
            "{} {} {} {}",
            xr.start,
            px(xr.start, yr.start).0,
            xr.end,
            px(xr.end, yr.start).0
        );
        y_map = format!(
            "{} {} {} {}",
            yr.start,
            px(xr.start, yr.start).1,
            yr.end,
            px(xr.start, yr.end).1
        );
        root.present().map_err(err)?;
    }
    Ok(Figure {
        svg,
        x_map,
        y_map,
        title: chart.title.clone(),
        x_label: chart.x_label(),
        note: chart.x_note.clone(),
    })
}

/// The chart's context as `figure` draws on it: plotters' SVG backend, f64 axes.
type Context<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The target lines (dashed) and the curves (with their markers), each with its legend entry.
fn draw_lines(c: &mut Context, chart: &Chart, xr: &std::ops::Range<f64>) -> Result<()> {
    for t in &chart.targets {
        c.draw_series(DashedLineSeries::new(
            [(xr.start, t.loss), (xr.end, t.loss)],
            6,
            4,
            TARGET.stroke_width(1),
        ))
        .map_err(err)?
        .label(&t.label)
        .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], TARGET));
    }
    for (i, curve) in chart.curves.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        c.draw_series(LineSeries::new(curve.points.iter().copied(), colour.stroke_width(2)))
            .map_err(err)?
            .label(legend_label(curve))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2)));
        if curve.markers {
            c.draw_series(curve.points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                .map_err(err)?;
        }
    }
    Ok(())
}

/// A small curve without axes for a table cell: the first curve and the first target line.
pub fn sparkline(chart: &Chart, size: (u32, u32)) -> Result<String> {
    let (xr, yr) = ranges(chart);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let mut c =
            ChartBuilder::on(&root).margin(3).build_cartesian_2d(xr.clone(), yr).map_err(err)?;
        if let Some(t) = chart.targets.first() {
            c.draw_series(DashedLineSeries::new(
                [(xr.start, t.loss), (xr.end, t.loss)],
                3,
                2,
                TARGET.stroke_width(1),
            ))
            .map_err(err)?;
        }
        if let Some(curve) = chart.curves.first() {
            c.draw_series(LineSeries::new(
                curve.points.iter().copied(),
                PALETTE[0].stroke_width(2),
            ))
            .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The legend names a curve by its record or run, not its full title.
fn legend_label(curve: &Curve) -> String {
    curve
        .label
        .split_once(' ')
        .filter(|(h, _)| h.starts_with('#'))
        .map_or(curve.label.clone(), |(h, _)| h.to_string())
}

/// The x range from 0 (or the smallest x) to the largest x; the y range over the curves and
/// the targets, padded by 4% each side.
fn ranges(chart: &Chart) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
    let pts = chart.curves.iter().flat_map(|c| &c.points);
    let x_start = if chart.x.from_zero() { 0f64 } else { f64::MAX };
    let (mut x0, mut x1, mut y0, mut y1) = (x_start, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    for t in &chart.targets {
        (y0, y1) = (y0.min(t.loss), y1.max(t.loss));
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let pad = ((y1 - y0) * 0.04).max(1e-3);
    let x_end = if chart.x == XAxis::Seconds { x1 * 1.02 } else { x1 };
    (x0..x_end, (y0 - pad)..(y1 + pad))
}

/// Decimals for tick labels over a span: whole numbers for wide spans, more for narrow ones.
fn decimals(span: f64) -> usize {
    match span {
        s if s >= 20.0 => 0,
        s if s >= 2.0 => 1,
        s if s >= 0.2 => 2,
        _ => 3,
    }
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e:?}")
}
