//! Numbers to a picture: renders line charts as one standalone SVG document, with no
//! dependencies. This module owns everything visual — axes, "nice" ticks, layout, colours,
//! markers, legend, escaping. It must not know what the numbers mean (benchmarks, runtimes,
//! units): callers bring the titles, labels and series names.

// `steady bench operators` wires this in; until it does, only the tests call it.
#![cfg_attr(not(test), allow(dead_code))]

use std::fmt::{self, Write as _};

/// One line on a chart.
pub struct Series {
    /// Shown in the legend.
    pub name: String,
    /// `(x, y)` pairs. Points with a NaN or infinite coordinate are skipped; the rest are
    /// joined in order of x, so callers need not sort them.
    pub points: Vec<(f64, f64)>,
}

/// One chart panel.
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// A series' style is chosen by its position, so the same position in every chart of a
    /// document looks the same and one legend reading carries across panels. There are four
    /// styles; a fifth series repeats the first.
    pub series: Vec<Series>,
}

/// Renders several charts laid out left to right in one SVG document, each panel
/// `PANEL_WIDTH` x `PANEL_HEIGHT` pixels. Both axes are linear and always include 0, so
/// side-by-side bars of different heights are not exaggerated by a cropped axis.
pub fn render_svg(charts: &[Chart]) -> String {
    let mut out = String::new();
    write_document(&mut out, charts).expect("writing to a String cannot fail");
    out
}

const PANEL_WIDTH: f64 = 480.0;
const PANEL_HEIGHT: f64 = 320.0;
const MARGIN_LEFT: f64 = 64.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_BOTTOM: f64 = 48.0;
const TITLE_BASELINE: f64 = 20.0;
/// The legend sits between the title and the plot rather than inside the plot: a flat
/// series at the maximum runs along the top edge, exactly where an inset legend would be.
const LEGEND_TOP: f64 = 30.0;
const LEGEND_ROW: f64 = 16.0;
const LEGEND_SAMPLE: f64 = 24.0;
const LEGEND_GAP: f64 = 18.0;
/// No font metrics without dependencies; an average sans-serif glyph at 11px is about this.
const CHAR_WIDTH: f64 = 6.2;
/// Below this the plot is useless, so an oversized legend overlaps it instead.
const MIN_PLOT_HEIGHT: f64 = 80.0;
const TARGET_TICKS: f64 = 5.0;
/// Markers at the plot edge must not be cut in half by the clip.
const CLIP_SLACK: f64 = 6.0;

struct Style {
    colour: &'static str,
    /// Dash patterns and marker shapes keep series apart in greyscale print and for
    /// readers who cannot tell the colours apart.
    dash: Option<&'static str>,
    marker: Marker,
}

#[derive(Clone, Copy)]
enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
}

/// Okabe–Ito colours: distinguishable under the common colour-vision deficiencies.
const STYLES: [Style; 4] = [
    Style {
        colour: "#0072b2",
        dash: None,
        marker: Marker::Circle,
    },
    Style {
        colour: "#d55e00",
        dash: Some("7 4"),
        marker: Marker::Square,
    },
    Style {
        colour: "#009e73",
        dash: Some("2 3"),
        marker: Marker::Triangle,
    },
    Style {
        colour: "#cc79a7",
        dash: Some("9 3 2 3"),
        marker: Marker::Diamond,
    },
];

fn style(index: usize) -> &'static Style {
    &STYLES[index % STYLES.len()]
}

/// A linear axis from `min` to `max` with a tick every `step`; all three are finite and
/// `min < max`, which is what keeps NaN out of every coordinate derived from it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Axis {
    min: f64,
    max: f64,
    step: f64,
}

impl Axis {
    /// The range an axis falls back to when the data gives it nothing to span.
    const UNIT: Axis = Axis {
        min: 0.0,
        max: 1.0,
        step: 0.2,
    };

    /// An axis covering 0 and every (finite) value, with round ticks.
    fn fit(values: impl IntoIterator<Item = f64>) -> Axis {
        let (lo, hi) = values
            .into_iter()
            .fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        Axis::nice(lo, hi).unwrap_or(Axis::UNIT)
    }

    /// Steps of 1, 2 or 5 times a power of ten, about `TARGET_TICKS` of them, with the ends
    /// rounded outwards to a step. `None` when there is no span (all zeros) or the span does
    /// not fit in an f64.
    fn nice(lo: f64, hi: f64) -> Option<Axis> {
        let span = hi - lo;
        if !(span.is_finite() && span > 0.0) {
            return None;
        }
        let raw = span / TARGET_TICKS;
        let magnitude = 10f64.powf(raw.log10().floor());
        // The tolerances absorb float noise such as 10000/5 landing a hair above 2000.
        let step = [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .map(|m| m * magnitude)
            .find(|step| *step >= raw * (1.0 - 1e-9))?;
        let min = (lo / step + 1e-9).floor() * step;
        let max = (hi / step - 1e-9).ceil() * step;
        let axis = Axis { min, max, step };
        (min.is_finite() && max.is_finite() && step > 0.0 && max > min).then_some(axis)
    }

    fn ticks(&self) -> Vec<f64> {
        let count = ((self.max - self.min) / self.step).round() as usize;
        (0..=count)
            .map(|i| {
                let value = self.min + i as f64 * self.step;
                // Accumulated error would otherwise print a negative zero on mixed-sign axes.
                if value.abs() < self.step * 1e-9 {
                    0.0
                } else {
                    value
                }
            })
            .collect()
    }

    /// Where `value` falls between the ends, 0 at `min` and 1 at `max`.
    fn fraction(&self, value: f64) -> f64 {
        (value - self.min) / (self.max - self.min)
    }
}

/// A compact tick label: SI suffixes for large values (10000 -> "10k") and only as many
/// decimals as the step needs (so 0.30000000000000004 prints as "0.3").
fn format_tick(value: f64, step: f64) -> String {
    const SCALES: [(f64, &str); 4] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    let (scale, suffix) = SCALES
        .iter()
        .copied()
        .find(|(scale, _)| value.abs() >= *scale)
        .unwrap_or((1.0, ""));
    let decimals = (-(step / scale).log10()).ceil();
    let decimals = if decimals.is_finite() {
        decimals.clamp(0.0, 9.0) as usize
    } else {
        0
    };
    let mut text = format!("{:.*}", decimals, value / scale);
    if text.contains('.') {
        text.truncate(text.trim_end_matches('0').trim_end_matches('.').len());
    }
    if text == "-0" {
        text = "0".to_owned();
    }
    text.push_str(suffix);
    text
}

/// The plot area of one panel, in panel coordinates, and the axes mapped onto it.
struct Frame {
    x: Axis,
    y: Axis,
    left: f64,
    top: f64,
    width: f64,
    height: f64,
}

impl Frame {
    fn new(x: Axis, y: Axis, top: f64) -> Frame {
        Frame {
            x,
            y,
            left: MARGIN_LEFT,
            top,
            width: PANEL_WIDTH - MARGIN_LEFT - MARGIN_RIGHT,
            height: PANEL_HEIGHT - MARGIN_BOTTOM - top,
        }
    }

    fn bottom(&self) -> f64 {
        self.top + self.height
    }

    fn right(&self) -> f64 {
        self.left + self.width
    }

    fn px(&self, x: f64) -> f64 {
        self.left + self.x.fraction(x) * self.width
    }

    fn py(&self, y: f64) -> f64 {
        self.bottom() - self.y.fraction(y) * self.height
    }

    /// `None` when a finite but enormous value still overflows on the way to pixels.
    fn map(&self, (x, y): (f64, f64)) -> Option<(f64, f64)> {
        let (px, py) = (self.px(x), self.py(y));
        (px.is_finite() && py.is_finite()).then_some((px, py))
    }
}

/// The drawable points of a series: finite ones only, in order of x.
fn finite_points(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut finite: Vec<_> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    finite.sort_by(|a, b| a.0.total_cmp(&b.0));
    finite
}

/// Where each legend entry goes (x offset from the plot's left edge, row) and how many
/// rows that takes; entries wrap when a row would run past the plot's width.
fn legend_layout(series: &[Series], width: f64) -> (Vec<(f64, usize)>, usize) {
    let mut positions = Vec::with_capacity(series.len());
    let (mut x, mut row) = (0.0, 0);
    for s in series {
        let entry = LEGEND_SAMPLE + 6.0 + s.name.chars().count() as f64 * CHAR_WIDTH;
        if x > 0.0 && x + entry > width {
            x = 0.0;
            row += 1;
        }
        positions.push((x, row));
        x += entry + LEGEND_GAP;
    }
    let rows = if series.is_empty() { 0 } else { row + 1 };
    (positions, rows)
}

fn write_document(out: &mut String, charts: &[Chart]) -> fmt::Result {
    // An empty document still gets one panel's worth of canvas rather than a zero width,
    // which some viewers refuse to display.
    let width = PANEL_WIDTH * charts.len().max(1) as f64;
    let height = PANEL_HEIGHT;
    writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    )?;
    let titles: Vec<&str> = charts.iter().map(|c| c.title.as_str()).collect();
    writeln!(out, "<title>{}</title>", escape(&titles.join(" | ")))?;
    // Transparent SVGs turn unreadable in dark-themed viewers.
    writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#)?;
    for (index, chart) in charts.iter().enumerate() {
        write_panel(out, chart, index, index as f64 * PANEL_WIDTH)?;
    }
    writeln!(out, "</svg>")
}

fn write_panel(out: &mut String, chart: &Chart, index: usize, offset: f64) -> fmt::Result {
    let points: Vec<Vec<(f64, f64)>> = chart
        .series
        .iter()
        .map(|s| finite_points(&s.points))
        .collect();
    let x = Axis::fit(points.iter().flatten().map(|p| p.0));
    let y = Axis::fit(points.iter().flatten().map(|p| p.1));
    let plot_width = PANEL_WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let (legend, rows) = legend_layout(&chart.series, plot_width);
    let top = (LEGEND_TOP + rows as f64 * LEGEND_ROW + 8.0)
        .min(PANEL_HEIGHT - MARGIN_BOTTOM - MIN_PLOT_HEIGHT);
    let frame = Frame::new(x, y, top);

    writeln!(out, r#"<g transform="translate({offset},0)">"#)?;
    writeln!(
        out,
        r#"<text x="{:.1}" y="{TITLE_BASELINE}" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
        PANEL_WIDTH / 2.0,
        escape(&chart.title)
    )?;
    write_axes(out, &frame, chart)?;
    write_series(out, &frame, &points, index)?;
    write_legend(out, &frame, &chart.series, &legend)?;
    writeln!(out, "</g>")
}

fn write_axes(out: &mut String, frame: &Frame, chart: &Chart) -> fmt::Result {
    writeln!(out, r##"<g stroke="#e3e3e3" stroke-width="1">"##)?;
    for tick in frame.y.ticks() {
        let y = frame.py(tick);
        writeln!(
            out,
            r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/>"#,
            frame.left,
            frame.right()
        )?;
    }
    for tick in frame.x.ticks() {
        let x = frame.px(tick);
        writeln!(
            out,
            r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}"/>"#,
            frame.top,
            frame.bottom()
        )?;
    }
    writeln!(out, "</g>")?;

    writeln!(out, r##"<g fill="#333">"##)?;
    for tick in frame.y.ticks() {
        writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" dy="0.32em" text-anchor="end">{}</text>"#,
            frame.left - 6.0,
            frame.py(tick),
            format_tick(tick, frame.y.step)
        )?;
    }
    for tick in frame.x.ticks() {
        writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            frame.px(tick),
            frame.bottom() + 16.0,
            format_tick(tick, frame.x.step)
        )?;
    }
    writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{}</text>"#,
        frame.left + frame.width / 2.0,
        PANEL_HEIGHT - 10.0,
        escape(&chart.x_label)
    )?;
    writeln!(
        out,
        r#"<text transform="translate(16,{:.1}) rotate(-90)" text-anchor="middle" font-size="12">{}</text>"#,
        frame.top + frame.height / 2.0,
        escape(&chart.y_label)
    )?;
    writeln!(out, "</g>")?;

    writeln!(
        out,
        r##"<path d="M{:.1},{:.1} V{:.1} H{:.1}" fill="none" stroke="#333" stroke-width="1"/>"##,
        frame.left,
        frame.top,
        frame.bottom(),
        frame.right()
    )
}

fn write_series(
    out: &mut String,
    frame: &Frame,
    points: &[Vec<(f64, f64)>],
    panel: usize,
) -> fmt::Result {
    // Each panel's plot area differs (legend height), so each gets its own clip; the id is
    // unique within the document.
    writeln!(
        out,
        r#"<clipPath id="plot-area-{panel}"><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}"/></clipPath>"#,
        frame.left - CLIP_SLACK,
        frame.top - CLIP_SLACK,
        frame.width + 2.0 * CLIP_SLACK,
        frame.height + 2.0 * CLIP_SLACK
    )?;
    writeln!(out, r#"<g clip-path="url(#plot-area-{panel})">"#)?;
    for (index, series) in points.iter().enumerate() {
        let style = style(index);
        let mapped: Vec<(f64, f64)> = series.iter().filter_map(|p| frame.map(*p)).collect();
        if mapped.len() >= 2 {
            let coords: Vec<String> = mapped
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect();
            writeln!(
                out,
                r#"<polyline fill="none" stroke="{}" stroke-width="2" stroke-linejoin="round"{} points="{}"/>"#,
                style.colour,
                dash_attribute(style),
                coords.join(" ")
            )?;
        }
        for (x, y) in mapped {
            write_marker(out, style, x, y)?;
        }
    }
    writeln!(out, "</g>")
}

fn dash_attribute(style: &Style) -> String {
    style
        .dash
        .map(|dash| format!(r#" stroke-dasharray="{dash}""#))
        .unwrap_or_default()
}

fn write_marker(out: &mut String, style: &Style, x: f64, y: f64) -> fmt::Result {
    let c = style.colour;
    match style.marker {
        Marker::Circle => writeln!(
            out,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{c}"/>"#
        ),
        Marker::Square => writeln!(
            out,
            r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{c}"/>"#,
            x - 3.5,
            y - 3.5
        ),
        Marker::Triangle => writeln!(
            out,
            r#"<path d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{c}"/>"#,
            y - 4.5,
            x + 4.0,
            y + 3.0,
            x - 4.0,
            y + 3.0
        ),
        Marker::Diamond => writeln!(
            out,
            r#"<path d="M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z" fill="{c}"/>"#,
            y - 4.5,
            x + 4.5,
            y + 4.5,
            x - 4.5
        ),
    }
}

fn write_legend(
    out: &mut String,
    frame: &Frame,
    series: &[Series],
    positions: &[(f64, usize)],
) -> fmt::Result {
    for (index, (s, (dx, row))) in series.iter().zip(positions).enumerate() {
        let style = style(index);
        let x = frame.left + dx;
        let y = LEGEND_TOP + *row as f64 * LEGEND_ROW + LEGEND_ROW / 2.0 - 4.0;
        writeln!(
            out,
            r#"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}" stroke-width="2"{}/>"#,
            x + LEGEND_SAMPLE,
            style.colour,
            dash_attribute(style)
        )?;
        write_marker(out, style, x + LEGEND_SAMPLE / 2.0, y)?;
        writeln!(
            out,
            r#"<text x="{:.1}" y="{y:.1}" dy="0.32em">{}</text>"#,
            x + LEGEND_SAMPLE + 6.0,
            escape(&s.name)
        )?;
    }
    Ok(())
}

/// Escapes text for element content and double-quoted attributes. Control characters are
/// dropped because XML 1.0 cannot carry them at all, and one would make the whole
/// document unreadable.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\t' | '\n' | '\r' => escaped.push(c),
            c if c.is_control() => {}
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, points: &[(f64, f64)]) -> Series {
        Series {
            name: name.to_owned(),
            points: points.to_vec(),
        }
    }

    fn chart(series: Vec<Series>) -> Chart {
        Chart {
            title: "cold start".to_owned(),
            x_label: "N".to_owned(),
            y_label: "seconds".to_owned(),
            series,
        }
    }

    /// No XML parser among the dependencies, so: tags balance and nest, there is exactly
    /// one root and it is `<svg>`, attribute quotes pair up, and every `&` starts a known
    /// entity.
    fn assert_well_formed(svg: &str) {
        fn assert_entities(text: &str) {
            for (i, _) in text.match_indices('&') {
                let rest = &text[i..];
                assert!(
                    ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                        .iter()
                        .any(|e| rest.starts_with(e)),
                    "bare & in {text:?}"
                );
            }
        }
        let mut stack: Vec<&str> = Vec::new();
        let mut roots = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            assert!(
                !stack.is_empty() || text.trim().is_empty(),
                "text outside the root: {text:?}"
            );
            assert!(!text.contains('>'), "stray > in {text:?}");
            assert_entities(text);
            let end = start + rest[start..].find('>').expect("unclosed tag");
            let tag = &rest[start + 1..end];
            rest = &rest[end + 1..];
            assert!(!tag.contains('<'), "< inside tag {tag:?}");
            assert_eq!(tag.matches('"').count() % 2, 0, "unpaired quote in {tag:?}");
            assert_entities(tag);
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name.trim()), "mismatched </{name}>");
                continue;
            }
            let name = tag
                .trim_end_matches('/')
                .split_whitespace()
                .next()
                .expect("tag name");
            if stack.is_empty() {
                roots.push(name);
            }
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        assert!(rest.trim().is_empty(), "trailing text {rest:?}");
        assert!(stack.is_empty(), "unclosed {stack:?}");
        assert_eq!(roots, ["svg"]);
    }

    /// The `(x, y)` pairs of every polyline, in document order.
    fn polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
        svg.lines()
            .filter(|l| l.starts_with("<polyline"))
            .map(|l| {
                let start = l.find(r#"points=""#).unwrap() + r#"points=""#.len();
                let end = start + l[start..].find('"').unwrap();
                l[start..end]
                    .split(' ')
                    .map(|pair| {
                        let (x, y) = pair.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect()
            })
            .collect()
    }

    fn assert_close(actual: (f64, f64), expected: (f64, f64)) {
        assert!(
            (actual.0 - expected.0).abs() < 0.06 && (actual.1 - expected.1).abs() < 0.06,
            "{actual:?} != {expected:?}"
        );
    }

    fn two_runtimes() -> Vec<Chart> {
        let time = chart(vec![
            series("steady", &[(0.0, 0.0), (100.0, 1.5), (1000.0, 4.0)]),
            series("kube-runtime", &[(0.0, 0.0), (100.0, 2.0), (1000.0, 7.0)]),
        ]);
        let memory = Chart {
            title: "operator memory".to_owned(),
            x_label: "N".to_owned(),
            y_label: "MiB".to_owned(),
            series: vec![
                series("steady", &[(100.0, 12.0), (1000.0, 20.0)]),
                series("kube-runtime", &[(100.0, 30.0), (1000.0, 30.0)]),
            ],
        };
        vec![time, memory]
    }

    #[test]
    fn renders_a_standalone_well_formed_document() {
        let svg = render_svg(&two_runtimes());
        assert_well_formed(&svg);
        assert!(svg.starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg""#));
        assert!(svg.contains(r#"width="960" height="320" viewBox="0 0 960 320""#));
        assert!(svg.contains(">cold start</text>"));
        assert!(svg.contains(">operator memory</text>"));
        assert!(svg.contains(">MiB</text>"));
        assert_eq!(polylines(&svg).len(), 4);
    }

    #[test]
    fn the_legend_names_every_series_in_a_distinct_style() {
        let svg = render_svg(&two_runtimes());
        // Once per panel.
        assert_eq!(svg.matches(">steady</text>").count(), 2);
        assert_eq!(svg.matches(">kube-runtime</text>").count(), 2);
        let (first, second) = (style(0), style(1));
        assert_ne!(first.colour, second.colour);
        // Solid against dashed, so greyscale still tells them apart.
        assert_ne!(first.dash, second.dash);
        assert!(svg.contains(
            r##"stroke="#d55e00" stroke-width="2" stroke-linejoin="round" stroke-dasharray="7 4""##
        ));
    }

    #[test]
    fn the_origin_and_the_maximum_land_on_the_plot_corners() {
        let svg = render_svg(&[chart(vec![series(
            "steady",
            &[(10.0, 100.0), (0.0, 0.0), (5.0, 40.0)],
        )])]);
        let (legend, rows) = legend_layout(&[series("steady", &[])], 396.0);
        assert_eq!((legend.len(), rows), (1, 1));
        let frame = Frame::new(Axis::UNIT, Axis::UNIT, LEGEND_TOP + LEGEND_ROW + 8.0);
        let line = &polylines(&svg)[0];
        // Joined in order of x, whatever order they came in.
        assert_close(line[0], (frame.left, frame.bottom()));
        assert_close(
            line[1],
            (
                frame.left + frame.width / 2.0,
                frame.bottom() - 0.4 * frame.height,
            ),
        );
        assert_close(line[2], (frame.right(), frame.top));
    }

    #[test]
    fn every_point_maps_inside_the_plot_area() {
        let frame = Frame::new(Axis::fit([3.0, 970.0]), Axis::fit([-2.5, 0.1, 7.3]), 54.0);
        for p in [(3.0, -2.5), (970.0, 7.3), (0.0, 0.0), (500.0, 1.0)] {
            let (x, y) = frame.map(p).unwrap();
            assert!((frame.left..=frame.right()).contains(&x), "{p:?} -> x {x}");
            assert!((frame.top..=frame.bottom()).contains(&y), "{p:?} -> y {y}");
        }
    }

    #[test]
    fn ticks_are_nice() {
        let ticks = |max: f64| Axis::fit([max]).ticks();
        assert_eq!(ticks(7.0), [0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(ticks(10.0), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(37.0), [0.0, 10.0, 20.0, 30.0, 40.0]);
        assert_eq!(ticks(150.0), [0.0, 50.0, 100.0, 150.0]);
        assert_eq!(
            ticks(10000.0),
            [0.0, 2000.0, 4000.0, 6000.0, 8000.0, 10000.0]
        );
        let labels = |max: f64| {
            let axis = Axis::fit([max]);
            let ticks = axis.ticks().into_iter();
            ticks.map(|t| format_tick(t, axis.step)).collect::<Vec<_>>()
        };
        assert_eq!(labels(10000.0), ["0", "2k", "4k", "6k", "8k", "10k"]);
        assert_eq!(labels(0.9), ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
        // Negative data extends the axis below 0 instead of falling off the plot.
        assert_eq!(
            Axis::fit([-3.0, 6.0]).ticks(),
            [-4.0, -2.0, 0.0, 2.0, 4.0, 6.0]
        );
        // Nothing to span: a unit axis rather than a division by zero.
        assert_eq!(Axis::fit([0.0]), Axis::UNIT);
        assert_eq!(Axis::fit([]), Axis::UNIT);
    }

    #[test]
    fn tick_labels_are_compact() {
        assert_eq!(format_tick(10000.0, 2000.0), "10k");
        assert_eq!(format_tick(1500.0, 500.0), "1.5k");
        assert_eq!(format_tick(2.5, 0.5), "2.5");
        assert_eq!(format_tick(0.1 * 3.0, 0.1), "0.3");
        assert_eq!(format_tick(3_000_000.0, 1_000_000.0), "3M");
        assert_eq!(format_tick(2.5e9, 5e8), "2.5G");
        assert_eq!(format_tick(0.00004, 0.00002), "0.00004");
        assert_eq!(format_tick(-0.0, 1.0), "0");
        assert_eq!(format_tick(-2000.0, 1000.0), "-2k");
    }

    #[test]
    fn text_is_escaped() {
        let mut c = chart(vec![series(r#"a<b & "c">'d'"#, &[(1.0, 1.0)])]);
        c.title = "x < y & z\u{0}".to_owned();
        let svg = render_svg(&[c]);
        assert_well_formed(&svg);
        assert!(svg.contains(">a&lt;b &amp; &quot;c&quot;&gt;&apos;d&apos;</text>"));
        assert!(svg.contains(">x &lt; y &amp; z</text>"));
    }

    #[test]
    fn degenerate_input_renders_without_nan() {
        let cases: Vec<Vec<Chart>> = vec![
            vec![],
            vec![chart(vec![])],
            vec![chart(vec![series("empty", &[])])],
            vec![chart(vec![series("one", &[(5.0, 3.0)])])],
            vec![chart(vec![series("origin", &[(0.0, 0.0)])])],
            vec![chart(vec![series("zeros", &[(0.0, 0.0), (0.0, 0.0)])])],
            vec![chart(vec![series(
                "non-finite",
                &[
                    (f64::NAN, 1.0),
                    (1.0, f64::INFINITY),
                    (f64::NEG_INFINITY, f64::NAN),
                    (2.0, 4.0),
                ],
            )])],
            vec![chart(vec![series(
                "nothing drawable",
                &[(f64::NAN, f64::NAN)],
            )])],
            vec![chart(vec![series(
                "huge",
                &[
                    (f64::MAX, f64::MAX),
                    (-f64::MAX, 1.0),
                    (1.0, f64::MIN_POSITIVE),
                ],
            )])],
            vec![chart(
                (0..30)
                    .map(|i| {
                        series(
                            &format!("a rather long series name {i}"),
                            &[(i as f64, 1.0)],
                        )
                    })
                    .collect(),
            )],
        ];
        for charts in cases {
            let svg = render_svg(&charts);
            assert_well_formed(&svg);
            let lower = svg.to_lowercase();
            assert!(!lower.contains("nan"), "NaN in {svg}");
            assert!(!lower.contains("inf"), "inf in {svg}");
        }
    }

    #[test]
    fn non_finite_points_are_skipped_not_drawn() {
        let svg = render_svg(&[chart(vec![series(
            "gappy",
            &[(0.0, 0.0), (1.0, f64::NAN), (2.0, 2.0)],
        )])]);
        assert_eq!(polylines(&svg)[0].len(), 2);
        assert_eq!(
            svg.matches("<circle").count(),
            3,
            "two points and the legend"
        );
    }
}
