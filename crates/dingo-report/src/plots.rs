//! Charts for the simulator reports, the demo and the benchmarks, each
//! written as SVG and PNG. Text is drawn with an embedded DejaVu Sans
//! through ab_glyph, so no system font library is needed.

use crate::ReportError;
use crate::markers;
use dingo_types::TaskKind;
use plotters::coord::Shift;
use plotters::element::ComposedElement;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// The colour type of [`Series`], so users need not name plotters.
pub use plotters::style::RGBColor;

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 560;
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Colours of the eight tasks, by `TaskKind::index`.
pub const TASK_COLORS: [RGBColor; TaskKind::COUNT] = [
    RGBColor(214, 39, 40),   // reconstruction
    RGBColor(31, 119, 180),  // scrubbing
    RGBColor(44, 160, 44),   // garbage collection
    RGBColor(255, 127, 14),  // transcoding
    RGBColor(148, 103, 189), // rebalancing
    RGBColor(140, 86, 75),   // georeplication
    RGBColor(23, 190, 207),  // file scrubbing
    RGBColor(188, 189, 34),  // fsck
];
pub const MODE_COLORS: [RGBColor; 3] = [RGBColor(200, 55, 45), RGBColor(35, 100, 200), RGBColor(30, 150, 70)];
pub const DISK_COLOR: RGBColor = RGBColor(70, 70, 70);
pub const ELIDED_COLOR: RGBColor = RGBColor(200, 200, 200);
pub const BUDGET_COLOR: RGBColor = RGBColor(110, 110, 110);
pub const REALIZED_COLOR: RGBColor = RGBColor(255, 127, 14);

fn register_font() -> Result<(), ReportError> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).map_err(|_| ReportError::Font);
    });
    result
}

/// A plotters error as text: its type is generic over the backend.
type DrawResult = Result<(), String>;

#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// A horizontal reference line (value, label).
    pub hline: Option<(f64, String)>,
    /// Events on the x axis (value, label): a dotted vertical line each,
    /// labelled at the top of the plot.
    pub markers: Vec<(f64, String)>,
}

/// A group of bars side by side under one label; each bar is its
/// segments stacked bottom up (value, colour).
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Vec<(f64, RGBColor)>>,
}

pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub groups: Vec<BarGroup>,
    /// Legend entries (label, colour).
    pub legend: Vec<(String, RGBColor)>,
    pub hline: Option<(f64, String)>,
}

/// Writes `name.svg` and `name.png` into `dir`.
fn save(
    dir: &Path,
    name: &str,
    draw: impl Fn(DrawingArea<SVGBackend, Shift>) -> DrawResult,
    draw_png: impl Fn(DrawingArea<BitMapBackend, Shift>) -> DrawResult,
) -> Result<(), ReportError> {
    register_font()?;
    let svg = dir.join(format!("{name}.svg"));
    draw(SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area())
        .map_err(|message| ReportError::Draw { path: svg.clone(), message })?;
    let png = dir.join(format!("{name}.png"));
    draw_png(BitMapBackend::new(&png, (WIDTH, HEIGHT)).into_drawing_area())
        .map_err(|message| ReportError::Draw { path: png.clone(), message })?;
    Ok(())
}

pub fn save_line(dir: &Path, name: &str, chart: &LineChart) -> Result<(), ReportError> {
    save(dir, name, |a| draw_line(a, chart), |a| draw_line(a, chart))
}

pub fn save_bars(dir: &Path, name: &str, chart: &BarChart) -> Result<(), ReportError> {
    save(dir, name, |a| draw_bars(a, chart), |a| draw_bars(a, chart))
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn draw_line<DB: DrawingBackend>(area: DrawingArea<DB, Shift>, chart: &LineChart) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let xs = chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).chain(chart.markers.iter().map(|m| m.0));
    let (x_min, x_max) = xs.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    // A range of one value gets some width: plotters' tick arithmetic
    // overflows on a range a billionth wide.
    let (x_min, x_max) = if x_min > x_max {
        (0.0, 1.0)
    } else if x_max - x_min < 1e-6 * x_min.abs().max(1.0) {
        let pad = 0.05 * x_min.abs().max(1.0);
        (x_min - pad, x_max + pad)
    } else {
        (x_min, x_max)
    };
    let y_top = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(chart.hline.as_ref().map(|h| h.0))
        .fold(0.0f64, f64::max);
    let label_font = ("sans-serif", 13).into_font();
    let labels = place_markers(&area, chart, &label_font, (x_min, x_max))?;
    let rows_used = labels.iter().map(|l| l.row).max().map_or(0, |r| r + 1);
    // The data stays below the lowest row of labels.
    let headroom = if rows_used == 0 { 1.0 / 1.12 } else { label_row_top(rows_used) - 0.02 };
    let y_max = if y_top > 0.0 { y_top / headroom } else { 1.0 };
    let mut ctx = ChartBuilder::on(&area)
        .caption(&chart.title, ("sans-serif", 24))
        .margin(LINE_MARGIN_PX)
        .x_label_area_size(48)
        .y_label_area_size(LINE_Y_LABELS_PX)
        .build_cartesian_2d(x_min..x_max, 0.0..y_max)
        .map_err(err)?;
    ctx.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    for s in &chart.series {
        let style = s.color.stroke_width(2);
        let anno = if s.dashed {
            ctx.draw_series(DashedLineSeries::new(s.points.iter().copied(), 10, 6, style)).map_err(err)?
        } else {
            // A line needs two points: a series of one is drawn as a dot.
            let dot_size = if s.points.len() == 1 { 4 } else { 0 };
            ctx.draw_series(LineSeries::new(s.points.iter().copied(), style).point_size(dot_size)).map_err(err)?
        };
        let (color, dashed) = (s.color, s.dashed);
        anno.label(&s.name).legend(move |(x, y)| legend_line(x, y, color, dashed));
    }
    if let Some((y, label)) = &chart.hline {
        let red = RGBColor(220, 0, 0);
        ctx.draw_series(DashedLineSeries::new([(x_min, *y), (x_max, *y)], 6, 4, red.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| legend_line(x, y, red, true));
    }
    let gray = RGBColor(90, 90, 90);
    for ((x, _), label) in chart.markers.iter().zip(labels) {
        ctx.draw_series(DashedLineSeries::new([(*x, 0.0), (*x, y_max)], 2, 4, gray.stroke_width(1))).map_err(err)?;
        let at = (label.left_x, y_max * label_row_top(label.row));
        ctx.draw_series(std::iter::once(Text::new(label.text, at, label_font.clone().color(&gray)))).map_err(err)?;
    }
    ctx.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    area.present().map_err(err)?;
    Ok(())
}

/// A line chart's margin and the width of its y axis labels, in pixels.
const LINE_MARGIN_PX: u32 = 14;
const LINE_Y_LABELS_PX: u32 = 78;

/// Most rows of event labels a chart stacks.
const MAX_LABEL_ROWS: usize = 6;

/// Top of label row `row` as a fraction of the y axis (row 0 at the top).
fn label_row_top(row: usize) -> f64 {
    0.985 - 0.04 * row as f64
}

/// An event label placed: its text, the x (in data units) it starts at
/// and its row.
struct PlacedLabel {
    text: String,
    left_x: f64,
    row: usize,
}

/// Places each event label: starting at its marker, or, if it would run
/// under the legend box (upper right), ending before it with an arrow
/// pointing at its marker ([`markers::clear_of`]); then stacked in rows
/// ([`markers::label_rows`]). Widths are measured in `font`, on a plot of
/// about the width the chart builder leaves (margins, y label area).
fn place_markers<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &LineChart,
    font: &FontDesc,
    (x_min, x_max): (f64, f64),
) -> Result<Vec<PlacedLabel>, String> {
    let plot_px = f64::from(WIDTH - 2 * LINE_MARGIN_PX - LINE_Y_LABELS_PX);
    let width_of = |text: &str, font: &FontDesc| {
        area.estimate_text_size(text, &TextStyle::from(font.clone())).map(|(w, _)| f64::from(w)).map_err(err)
    };
    // The legend: its widest name, the sample line and padding.
    let legend_font = ("sans-serif", 15).into_font();
    let mut widest = 0.0f64;
    for name in chart.series.iter().map(|s| s.name.as_str()).chain(chart.hline.iter().map(|h| h.1.as_str())) {
        widest = widest.max(width_of(name, &legend_font)?);
    }
    let legend_left = plot_px - (widest + LEGEND_EXTRA_PX);
    let (mut placed, mut spans) = (Vec::new(), Vec::new());
    for (x, label) in &chart.markers {
        let x_px = (x - x_min) / (x_max - x_min) * plot_px;
        let mut text = format!(" {label}");
        let mut width = width_of(&text, font)?;
        let (mut left, moved) = markers::clear_of(x_px, width, legend_left);
        if moved {
            text = format!("{label} \u{2192}");
            width = width_of(&text, font)?;
            left = markers::clear_of(x_px, width, legend_left).0;
        }
        spans.push((left, width));
        placed.push(PlacedLabel { text, left_x: x_min + left / plot_px * (x_max - x_min), row: 0 });
    }
    for (label, row) in placed.iter_mut().zip(markers::label_rows(&spans, MAX_LABEL_ROWS)) {
        label.row = row;
    }
    Ok(placed)
}

/// Pixels a legend takes beside its widest name: the sample line, the
/// gaps and the box's margin.
const LEGEND_EXTRA_PX: f64 = 60.0;

/// The path of a series: solid, or in dashes.
type LegendSample<DB> = ComposedElement<(i32, i32), DB, PathElement<(i32, i32)>, PathElement<(i32, i32)>>;

/// A legend sample drawn the way its series is: solid, or in dashes (two
/// segments either way, so both cases are one type).
fn legend_line<DB: DrawingBackend>(x: i32, y: i32, color: RGBColor, dashed: bool) -> LegendSample<DB> {
    let style = color.stroke_width(3);
    let (end, start) = if dashed { (8, 14) } else { (11, 11) };
    EmptyElement::at((x, y))
        + PathElement::new(vec![(0, 0), (end, 0)], style)
        + PathElement::new(vec![(start, 0), (22, 0)], style)
}

fn draw_bars<DB: DrawingBackend>(area: DrawingArea<DB, Shift>, chart: &BarChart) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let top = chart
        .groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.iter().map(|s| s.0).sum::<f64>()))
        .chain(chart.hline.as_ref().map(|h| h.0))
        .fold(0.0f64, f64::max);
    let y_max = if top > 0.0 { top * 1.15 } else { 1.0 };
    let n = chart.groups.len().max(1);
    let (plot, legend_area) = area.split_horizontally(WIDTH - 250);
    let mut ctx = ChartBuilder::on(&plot)
        .caption(&chart.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(78)
        .build_cartesian_2d(0.0..n as f64, 0.0..y_max)
        .map_err(err)?;
    let labels: Vec<String> = chart.groups.iter().map(|g| g.label.clone()).collect();
    ctx.configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 { labels.get(i).cloned().unwrap_or_default() } else { String::new() }
        })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .y_desc(&chart.y_label)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    for (i, group) in chart.groups.iter().enumerate() {
        let width = 0.8 / group.bars.len().max(1) as f64;
        for (j, bar) in group.bars.iter().enumerate() {
            let x0 = i as f64 + 0.1 + j as f64 * width;
            let mut base = 0.0;
            for &(value, color) in bar {
                if value <= 0.0 {
                    continue;
                }
                let rect = Rectangle::new([(x0 + 0.02, base), (x0 + width - 0.02, base + value)], color.filled());
                ctx.draw_series(std::iter::once(rect)).map_err(err)?;
                base += value;
            }
        }
    }
    if let Some((y, label)) = &chart.hline {
        let red = RGBColor(220, 0, 0);
        ctx.draw_series(DashedLineSeries::new([(0.0, *y), (n as f64, *y)], 6, 4, red.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| legend_line(x, y, red, true));
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .label_font(("sans-serif", 15))
            .draw()
            .map_err(err)?;
    }
    for (i, (label, color)) in chart.legend.iter().enumerate() {
        let y = 60 + i as i32 * 24;
        legend_area.draw(&Rectangle::new([(10, y), (26, y + 16)], color.filled())).map_err(err)?;
        legend_area.draw(&Text::new(label.clone(), (32, y), ("sans-serif", 14))).map_err(err)?;
    }
    area.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: every point at one x (a trace the cache holds whole:
    /// nothing written, one point per series) made plotters overflow
    /// computing ticks, with or without a marker elsewhere.
    #[test]
    fn a_chart_whose_points_share_one_x_is_drawn() {
        let dir = tempfile::tempdir().unwrap();
        for markers in [Vec::new(), vec![(625.0, "budget".to_string())]] {
            let chart = LineChart {
                title: "t".into(),
                x_label: "x".into(),
                y_label: "y".into(),
                series: vec![Series {
                    name: "s".into(),
                    color: DISK_COLOR,
                    points: vec![(0.0, 0.0); 3],
                    dashed: false,
                }],
                hline: None,
                markers,
            };
            save_line(dir.path(), "one-x", &chart).unwrap();
            assert!(dir.path().join("one-x.png").metadata().unwrap().len() > 0);
        }
    }
}
