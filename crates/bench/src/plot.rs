//! Charts as SVG and PNG, written by hand: no dependencies, no fonts to find (an SVG viewer
//! draws the text; the PNGs carry a built-in 5x7 font), byte-for-byte reproducible output.
//!
//! - Bar charts: one bar per labelled value (the median of the runs), the value printed above
//!   it, a whisker from the smallest to the largest run where the runs are given, a labelled y
//!   axis with round ticks, and a legend line that says what bar and whisker are.
//! - Line charts for time series: one line per series, both axes ticked and titled, a legend.

use std::fmt::Write as _;

/// A round step for about five ticks up to `max`.
pub fn tick_step(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// One bar: the value drawn, and optionally the range of the runs it summarises.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    /// The bar's height (a median); NaN: missing.
    pub value: f64,
    /// The smallest and largest run, drawn as a whisker.
    pub range: Option<(f64, f64)>,
}

impl Bar {
    /// A bar without a range.
    pub fn plain(label: impl Into<String>, value: f64) -> Bar {
        Bar {
            label: label.into(),
            value,
            range: None,
        }
    }
}

const PALETTE_SVG: [&str; 7] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
];

/// Geometry shared by the SVG and PNG bar charts.
struct BarLayout {
    left: f64,
    top: f64,
    bar_w: f64,
    gap: f64,
    plot_h: f64,
    top_v: f64,
    step: f64,
}

impl BarLayout {
    fn new(bars: &[Bar]) -> BarLayout {
        let max = bars
            .iter()
            .flat_map(|b| [b.value, b.range.map_or(f64::NAN, |r| r.1)])
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let step = tick_step(max);
        BarLayout {
            left: 70.0,
            top: 40.0,
            bar_w: 28.0,
            gap: 12.0,
            plot_h: 260.0,
            top_v: ((max / step).ceil() * step).max(step),
            step,
        }
    }

    fn y(&self, v: f64) -> f64 {
        self.top + self.plot_h - v / self.top_v * self.plot_h
    }

    fn x(&self, i: usize) -> f64 {
        self.left + self.gap / 2.0 + i as f64 * (self.bar_w + self.gap)
    }

    fn width(&self, n: usize) -> f64 {
        self.left + n.max(1) as f64 * (self.bar_w + self.gap) + 20.0
    }
}

/// A bar chart of `series` (label, value); NaN values are drawn as missing.
pub fn bars(title: &str, unit: &str, series: &[(String, f64)]) -> String {
    let bars: Vec<Bar> = series.iter().map(|(l, v)| Bar::plain(l, *v)).collect();
    bar_chart(title, unit, &bars, "")
}

/// A bar chart of `bars`, with min-max whiskers where a bar has a range, and `legend` (e.g.
/// "bars: median of 5 runs; whiskers: fastest to slowest run") under it when not empty.
pub fn bar_chart(title: &str, unit: &str, bars: &[Bar], legend: &str) -> String {
    let l = BarLayout::new(bars);
    let width = l.width(bars.len()).max(6.0 * legend.len() as f64 + 20.0);
    let height = l.top + l.plot_h + 130.0 + if legend.is_empty() { 0.0 } else { 20.0 };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{:.0}" y="20" text-anchor="middle" font-size="14">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    let mut t = 0.0;
    while t <= l.top_v + l.step / 2.0 {
        let ty = l.y(t);
        let _ = writeln!(
            s,
            r##"<line x1="{}" x2="{:.0}" y1="{ty:.1}" y2="{ty:.1}" stroke="#ddd"/><text x="{:.0}" y="{:.1}" text-anchor="end">{}</text>"##,
            l.left,
            width - 10.0,
            l.left - 5.0,
            ty + 4.0,
            num(t)
        );
        t += l.step;
    }
    let _ = writeln!(
        s,
        r#"<text x="15" y="{:.0}" transform="rotate(-90 15 {:.0})" text-anchor="middle">{}</text>"#,
        l.top + l.plot_h / 2.0,
        l.top + l.plot_h / 2.0,
        escape(unit)
    );
    for (i, b) in bars.iter().enumerate() {
        let x = l.x(i);
        let v = b.value;
        if v.is_finite() {
            // The value sits above the whisker when there is one.
            let label_y = b.range.map_or(l.y(v), |(_, hi)| l.y(hi.max(v))) - 3.0;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{}" height="{:.1}" fill="{}"/><text x="{:.1}" y="{label_y:.1}" text-anchor="middle" font-size="9">{}</text>"#,
                l.y(v),
                l.bar_w,
                l.top + l.plot_h - l.y(v),
                PALETTE_SVG[i % PALETTE_SVG.len()],
                x + l.bar_w / 2.0,
                num(v)
            );
            if let Some((lo, hi)) = b.range.filter(|r| r.0.is_finite() && r.1.is_finite()) {
                let cx = x + l.bar_w / 2.0;
                let _ = writeln!(
                    s,
                    r#"<path d="M{cx:.1} {:.1}V{:.1}M{:.1} {:.1}H{:.1}M{:.1} {:.1}H{:.1}" stroke="black" fill="none"/>"#,
                    l.y(lo),
                    l.y(hi),
                    cx - 5.0,
                    l.y(lo),
                    cx + 5.0,
                    cx - 5.0,
                    l.y(hi),
                    cx + 5.0
                );
            }
        }
        let lx = x + l.bar_w / 2.0;
        let ly = l.top + l.plot_h + 10.0;
        let _ = writeln!(
            s,
            r#"<text x="{lx:.1}" y="{ly:.1}" transform="rotate(45 {lx:.1} {ly:.1})">{}</text>"#,
            escape(&b.label)
        );
    }
    let _ = writeln!(
        s,
        r#"<line x1="{0}" x2="{0}" y1="{1}" y2="{2:.0}" stroke="black"/><line x1="{0}" x2="{3:.0}" y1="{2:.0}" y2="{2:.0}" stroke="black"/>"#,
        l.left,
        l.top,
        l.top + l.plot_h,
        width - 10.0,
    );
    if !legend.is_empty() {
        let _ = writeln!(
            s,
            r#"<text x="10" y="{:.0}" font-size="10">{}</text>"#,
            height - 8.0,
            escape(legend)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// A line series: its name and its points (x, y), in x order; NaN y values break the line.
pub type Series = (String, Vec<(f64, f64)>);

/// Geometry shared by the SVG and PNG line charts.
struct LineLayout {
    left: f64,
    top: f64,
    plot_w: f64,
    plot_h: f64,
    x_max: f64,
    x_step: f64,
    y_max: f64,
    y_step: f64,
}

impl LineLayout {
    fn new(series: &[Series]) -> LineLayout {
        let pts = || series.iter().flat_map(|s| s.1.iter());
        let fold =
            |f: fn(&(f64, f64)) -> f64| pts().map(f).filter(|v| v.is_finite()).fold(0.0, f64::max);
        let (x_max, y_max) = (fold(|p| p.0), fold(|p| p.1));
        let (x_step, y_step) = (tick_step(x_max), tick_step(y_max));
        LineLayout {
            left: 70.0,
            top: 40.0,
            plot_w: 520.0,
            plot_h: 260.0,
            x_max: ((x_max / x_step).ceil() * x_step).max(x_step),
            x_step,
            y_max: ((y_max / y_step).ceil() * y_step).max(y_step),
            y_step,
        }
    }

    fn px(&self, x: f64) -> f64 {
        self.left + x / self.x_max * self.plot_w
    }

    fn py(&self, y: f64) -> f64 {
        self.top + self.plot_h - y / self.y_max * self.plot_h
    }

    /// The runs of consecutive finite points of a series, in chart coordinates.
    fn runs(&self, pts: &[(f64, f64)]) -> Vec<Vec<(f64, f64)>> {
        let mut runs = vec![Vec::new()];
        for &(x, y) in pts {
            if x.is_finite() && y.is_finite() {
                runs.last_mut()
                    .expect("never empty")
                    .push((self.px(x), self.py(y)));
            } else if !runs.last().expect("never empty").is_empty() {
                runs.push(Vec::new());
            }
        }
        runs.retain(|r| !r.is_empty());
        runs
    }
}

/// A line chart of time series (e.g. requests/s per second of a run, a stage's threads per
/// controller period), with axis titles and a legend naming each line.
pub fn lines(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let l = LineLayout::new(series);
    let width = l.left + l.plot_w + 160.0;
    let height = l.top + l.plot_h + 60.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{:.0}" y="20" text-anchor="middle" font-size="14">{}</text>"#,
        l.left + l.plot_w / 2.0,
        escape(title)
    );
    let mut t = 0.0;
    while t <= l.y_max + l.y_step / 2.0 {
        let y = l.py(t);
        let _ = writeln!(
            s,
            r##"<line x1="{}" x2="{:.0}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.0}" y="{:.1}" text-anchor="end">{}</text>"##,
            l.left,
            l.left + l.plot_w,
            l.left - 5.0,
            y + 4.0,
            num(t)
        );
        t += l.y_step;
    }
    let mut t = 0.0;
    while t <= l.x_max + l.x_step / 2.0 {
        let x = l.px(t);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{:.0}" stroke="#ddd"/><text x="{x:.1}" y="{:.0}" text-anchor="middle">{}</text>"##,
            l.top,
            l.top + l.plot_h,
            l.top + l.plot_h + 15.0,
            num(t)
        );
        t += l.x_step;
    }
    let _ = writeln!(
        s,
        r#"<text x="15" y="{0:.0}" transform="rotate(-90 15 {0:.0})" text-anchor="middle">{1}</text><text x="{2:.0}" y="{3:.0}" text-anchor="middle">{4}</text>"#,
        l.top + l.plot_h / 2.0,
        escape(y_label),
        l.left + l.plot_w / 2.0,
        l.top + l.plot_h + 35.0,
        escape(x_label)
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let colour = PALETTE_SVG[i % PALETTE_SVG.len()];
        for run in l.runs(pts) {
            let d: Vec<String> = run.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.5"/>"#,
                d.join(" ")
            );
        }
        let ly = l.top + 10.0 + 18.0 * i as f64;
        let lx = l.left + l.plot_w + 15.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx:.0}" x2="{:.0}" y1="{ly:.0}" y2="{ly:.0}" stroke="{colour}" stroke-width="3"/><text x="{:.0}" y="{:.0}">{}</text>"#,
            lx + 20.0,
            lx + 25.0,
            ly + 4.0,
            escape(name)
        );
    }
    let _ = writeln!(
        s,
        r#"<line x1="{0}" x2="{0}" y1="{1}" y2="{2:.0}" stroke="black"/><line x1="{0}" x2="{3:.0}" y1="{2:.0}" y2="{2:.0}" stroke="black"/>"#,
        l.left,
        l.top,
        l.top + l.plot_h,
        l.left + l.plot_w,
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_ticks() {
        assert_eq!(tick_step(10.0), 2.0);
        assert_eq!(tick_step(1000.0), 200.0);
        assert_eq!(tick_step(0.9), 0.2);
        assert_eq!(tick_step(0.0), 1.0);
        assert_eq!(tick_step(30_000.0), 10_000.0);
    }

    #[test]
    fn one_bar_per_value() {
        let svg = bars(
            "t <x>",
            "ms",
            &[
                ("a".into(), 1.0),
                ("b&c".into(), 2.5),
                ("gone".into(), f64::NAN),
            ],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        // Two bars plus the background rectangle; the missing value has a label, no bar.
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains("t &lt;x&gt;") && svg.contains("b&amp;c") && svg.contains(">gone<"));
        assert!(svg.contains(">2.50<"));
    }

    #[test]
    fn whiskers_span_the_runs_and_the_legend_says_so() {
        let bars = [
            Bar {
                label: "a".into(),
                value: 5.0,
                range: Some((4.0, 8.0)),
            },
            Bar::plain("b", 2.0),
        ];
        let svg = bar_chart(
            "t",
            "ms",
            &bars,
            "bars: median of 5 runs; whiskers: min-max",
        );
        // One whisker, for the bar with a range; the axis reaches the top of the whisker.
        assert_eq!(svg.matches("<path").count(), 1);
        let l = BarLayout::new(&bars);
        assert_eq!(l.top_v, 8.0);
        let whisker = format!("V{:.1}", l.y(8.0));
        assert!(svg.contains(&whisker), "{svg}");
        assert!(svg.contains(">bars: median of 5 runs; whiskers: min-max<"));
        assert!(png_has_a_whisker_above_the_first_bar(&bars));
        assert!(!png_has_a_whisker_above_the_first_bar(&[
            Bar::plain("a", 5.0),
            bars[1].clone()
        ]));
    }

    /// Whether the PNG of `bars` has black (whisker) pixels between 5 and 8 above bar 0.
    fn png_has_a_whisker_above_the_first_bar(bars: &[Bar]) -> bool {
        let l = BarLayout::new(bars);
        let p = bar_chart_png("t", "ms", bars, "legend");
        let (w, _, px) = super::png_tests::decode(&p);
        let cx = (l.x(0) + l.bar_w / 2.0).round() as usize;
        let y = ((BarLayout::new(&[Bar::plain("", 8.0)]).y(8.0) + l.y(5.0)) / 2.0).round() as usize;
        px[y * w + cx] == 1
    }

    #[test]
    fn lines_break_at_missing_points_and_name_each_series() {
        let series = vec![
            (
                "req/s".to_string(),
                vec![
                    (0.0, 10.0),
                    (1.0, 20.0),
                    (2.0, f64::NAN),
                    (3.0, 15.0),
                    (4.0, 5.0),
                ],
            ),
            ("p99 <ms>".to_string(), vec![(0.0, 1.0), (4.0, 2.0)]),
        ];
        let svg = lines("timeline", "seconds", "value", &series);
        // The first series in two runs (broken at the NaN), the second in one.
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.contains(">req/s<") && svg.contains(">p99 &lt;ms&gt;<"));
        assert!(svg.contains(">seconds<") && svg.contains(">value<"));
        let l = LineLayout::new(&series);
        assert_eq!((l.x_max, l.y_max), (4.0, 20.0));
        let p = lines_png("timeline", "seconds", "value", &series);
        let (w, _, px) = super::png_tests::decode(&p);
        // Midway between the first two points the first series' colour is drawn.
        let (x, y) = ((l.px(0.5)).round() as usize, l.py(15.0).round() as usize);
        assert!(
            (y.saturating_sub(2)..=y + 2).any(|yy| px[yy * w + x] == 3),
            "no line at ({x}, {y})"
        );
    }
}

/// 5x7 glyphs, one byte per column, bit 0 the top row (digits, letters, a little punctuation;
/// lower case is drawn as upper case, anything else as a blank).
fn glyph(c: char) -> [u8; 5] {
    match c.to_ascii_uppercase() {
        '0' => [0x3E, 0x51, 0x49, 0x45, 0x3E],
        '1' => [0x00, 0x42, 0x7F, 0x40, 0x00],
        '2' => [0x42, 0x61, 0x51, 0x49, 0x46],
        '3' => [0x21, 0x41, 0x45, 0x4B, 0x31],
        '4' => [0x18, 0x14, 0x12, 0x7F, 0x10],
        '5' => [0x27, 0x45, 0x45, 0x45, 0x39],
        '6' => [0x3C, 0x4A, 0x49, 0x49, 0x30],
        '7' => [0x01, 0x71, 0x09, 0x05, 0x03],
        '8' => [0x36, 0x49, 0x49, 0x49, 0x36],
        '9' => [0x06, 0x49, 0x49, 0x29, 0x1E],
        'A' => [0x7E, 0x11, 0x11, 0x11, 0x7E],
        'B' => [0x7F, 0x49, 0x49, 0x49, 0x36],
        'C' => [0x3E, 0x41, 0x41, 0x41, 0x22],
        'D' => [0x7F, 0x41, 0x41, 0x22, 0x1C],
        'E' => [0x7F, 0x49, 0x49, 0x49, 0x41],
        'F' => [0x7F, 0x09, 0x09, 0x09, 0x01],
        'G' => [0x3E, 0x41, 0x49, 0x49, 0x7A],
        'H' => [0x7F, 0x08, 0x08, 0x08, 0x7F],
        'I' => [0x00, 0x41, 0x7F, 0x41, 0x00],
        'J' => [0x20, 0x40, 0x41, 0x3F, 0x01],
        'K' => [0x7F, 0x08, 0x14, 0x22, 0x41],
        'L' => [0x7F, 0x40, 0x40, 0x40, 0x40],
        'M' => [0x7F, 0x02, 0x0C, 0x02, 0x7F],
        'N' => [0x7F, 0x04, 0x08, 0x10, 0x7F],
        'O' => [0x3E, 0x41, 0x41, 0x41, 0x3E],
        'P' => [0x7F, 0x09, 0x09, 0x09, 0x06],
        'Q' => [0x3E, 0x41, 0x51, 0x21, 0x5E],
        'R' => [0x7F, 0x09, 0x19, 0x29, 0x46],
        'S' => [0x46, 0x49, 0x49, 0x49, 0x31],
        'T' => [0x01, 0x01, 0x7F, 0x01, 0x01],
        'U' => [0x3F, 0x40, 0x40, 0x40, 0x3F],
        'V' => [0x1F, 0x20, 0x40, 0x20, 0x1F],
        'W' => [0x3F, 0x40, 0x38, 0x40, 0x3F],
        'X' => [0x63, 0x14, 0x08, 0x14, 0x63],
        'Y' => [0x07, 0x08, 0x70, 0x08, 0x07],
        'Z' => [0x61, 0x51, 0x49, 0x45, 0x43],
        '.' => [0x00, 0x60, 0x60, 0x00, 0x00],
        ',' => [0x00, 0x50, 0x30, 0x00, 0x00],
        ':' => [0x00, 0x36, 0x36, 0x00, 0x00],
        ';' => [0x00, 0x56, 0x36, 0x00, 0x00],
        '+' => [0x08, 0x08, 0x3E, 0x08, 0x08],
        '*' => [0x14, 0x08, 0x3E, 0x08, 0x14],
        '<' => [0x08, 0x14, 0x22, 0x41, 0x00],
        '>' => [0x00, 0x41, 0x22, 0x14, 0x08],
        '#' => [0x14, 0x7F, 0x14, 0x7F, 0x14],
        '-' => [0x08, 0x08, 0x08, 0x08, 0x08],
        '=' => [0x14, 0x14, 0x14, 0x14, 0x14],
        '/' => [0x20, 0x10, 0x08, 0x04, 0x02],
        '_' => [0x40, 0x40, 0x40, 0x40, 0x40],
        '(' => [0x00, 0x1C, 0x22, 0x41, 0x00],
        ')' => [0x00, 0x41, 0x22, 0x1C, 0x00],
        '%' => [0x23, 0x13, 0x08, 0x64, 0x62],
        '\'' => [0x00, 0x00, 0x07, 0x00, 0x00],
        _ => [0; 5],
    }
}

/// RGB palette of the PNG charts: white, black, grid grey, then the series colours.
const PALETTE: [[u8; 3]; 10] = [
    [255, 255, 255],
    [0, 0, 0],
    [221, 221, 221],
    [0x4e, 0x79, 0xa7],
    [0xf2, 0x8e, 0x2b],
    [0xe1, 0x57, 0x59],
    [0x76, 0xb7, 0xb2],
    [0x59, 0xa1, 0x4f],
    [0xed, 0xc9, 0x48],
    [0xb0, 0x7a, 0xa1],
];

/// A paletted raster.
struct Canvas {
    w: usize,
    h: usize,
    px: Vec<u8>,
}

impl Canvas {
    fn new(w: usize, h: usize) -> Canvas {
        Canvas {
            w,
            h,
            px: vec![0; w * h],
        }
    }

    fn set(&mut self, x: i64, y: i64, c: u8) {
        if x >= 0 && y >= 0 && (x as usize) < self.w && (y as usize) < self.h {
            self.px[y as usize * self.w + x as usize] = c;
        }
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, c: u8) {
        let (x0, y0) = (x.round() as i64, y.round() as i64);
        let (x1, y1) = ((x + w).round() as i64, (y + h).round() as i64);
        for yy in y0..y1 {
            for xx in x0..x1 {
                self.set(xx, yy, c);
            }
        }
    }

    /// A line from `a` to `b`, two pixels thick (a step per pixel along the longer axis).
    fn line(&mut self, a: (f64, f64), b: (f64, f64), c: u8) {
        let steps = (b.0 - a.0).abs().max((b.1 - a.1).abs()).ceil().max(1.0);
        for k in 0..=steps as i64 {
            let f = k as f64 / steps;
            let (x, y) = (a.0 + (b.0 - a.0) * f, a.1 + (b.1 - a.1) * f);
            let (x, y) = (x.round() as i64, y.round() as i64);
            self.set(x, y, c);
            self.set(x, y + 1, c);
        }
    }

    /// Text with its top-left corner at (x, y), 6 pixels per character; `down` writes it
    /// turned a quarter clockwise, reading downwards from (x, y).
    fn text(&mut self, x: f64, y: f64, s: &str, c: u8, down: bool) {
        let (x, y) = (x.round() as i64, y.round() as i64);
        for (k, ch) in s.chars().enumerate() {
            let g = glyph(ch);
            for (col, bits) in g.iter().enumerate() {
                for row in 0..7 {
                    if bits >> row & 1 == 1 {
                        let (dx, dy) = if down {
                            (6 - row as i64, (k * 6 + col) as i64)
                        } else {
                            ((k * 6 + col) as i64, row as i64)
                        };
                        self.set(x + dx, y + dy, c);
                    }
                }
            }
        }
    }
}

/// The same chart as [`bars`], as a PNG (text in a built-in 5x7 font).
pub fn bars_png(title: &str, unit: &str, series: &[(String, f64)]) -> Vec<u8> {
    let bars: Vec<Bar> = series.iter().map(|(l, v)| Bar::plain(l, *v)).collect();
    bar_chart_png(title, unit, &bars, "")
}

/// The longest bar label a PNG chart prints whole (the SVG prints every label whole).
const LABEL_CHARS: usize = 32;

/// The same chart as [`bar_chart`], as a PNG.
pub fn bar_chart_png(title: &str, unit: &str, bars: &[Bar], legend: &str) -> Vec<u8> {
    let l = BarLayout::new(bars);
    let width = l
        .width(bars.len())
        .max(6.0 * title.len() as f64 + 20.0)
        .max(6.0 * legend.len() as f64 + 20.0);
    // Labels run down from the axis: room for the longest (at most LABEL_CHARS), and at least
    // the 20 characters every chart had room for.
    let label_chars = bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(20, LABEL_CHARS);
    let label_h = 6.0 * label_chars as f64 + 10.0;
    let height = l.top + l.plot_h + label_h + if legend.is_empty() { 0.0 } else { 20.0 };
    let mut cv = Canvas::new(width as usize, height as usize);
    cv.text(
        width / 2.0 - 3.0 * title.len() as f64,
        12.0,
        title,
        1,
        false,
    );
    let mut t = 0.0;
    while t <= l.top_v + l.step / 2.0 {
        let ty = l.y(t);
        cv.rect(l.left, ty, width - 10.0 - l.left, 1.0, 2);
        let label = num(t);
        cv.text(
            l.left - 6.0 - 6.0 * label.len() as f64,
            ty - 3.0,
            &label,
            1,
            false,
        );
        t += l.step;
    }
    cv.text(
        6.0,
        l.top + l.plot_h / 2.0 - 3.0 * unit.len() as f64,
        unit,
        1,
        true,
    );
    for (i, b) in bars.iter().enumerate() {
        let x = l.x(i);
        let v = b.value;
        if v.is_finite() {
            cv.rect(
                x,
                l.y(v),
                l.bar_w,
                l.top + l.plot_h - l.y(v),
                3 + (i % 7) as u8,
            );
            let mut label_y = l.y(v);
            if let Some((lo, hi)) = b.range.filter(|r| r.0.is_finite() && r.1.is_finite()) {
                let cx = x + l.bar_w / 2.0;
                cv.rect(cx, l.y(hi), 1.0, l.y(lo) - l.y(hi) + 1.0, 1);
                cv.rect(cx - 5.0, l.y(hi), 11.0, 1.0, 1);
                cv.rect(cx - 5.0, l.y(lo), 11.0, 1.0, 1);
                label_y = label_y.min(l.y(hi));
            }
            let s = num(v);
            cv.text(
                x + l.bar_w / 2.0 - 3.0 * s.len() as f64,
                label_y - 10.0,
                &s,
                1,
                false,
            );
        }
        let short: String = b.label.chars().take(LABEL_CHARS).collect();
        cv.text(
            x + l.bar_w / 2.0 - 4.0,
            l.top + l.plot_h + 6.0,
            &short,
            1,
            true,
        );
    }
    cv.rect(l.left, l.top, 1.0, l.plot_h, 1);
    cv.rect(l.left, l.top + l.plot_h, width - 10.0 - l.left, 1.0, 1);
    if !legend.is_empty() {
        cv.text(10.0, height - 16.0, legend, 1, false);
    }
    png(&cv)
}

/// The same chart as [`lines`], as a PNG.
pub fn lines_png(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> Vec<u8> {
    let l = LineLayout::new(series);
    let width = l.left + l.plot_w + 160.0;
    let height = l.top + l.plot_h + 60.0;
    let mut cv = Canvas::new(width as usize, height as usize);
    cv.text(
        l.left + l.plot_w / 2.0 - 3.0 * title.len() as f64,
        12.0,
        title,
        1,
        false,
    );
    let mut t = 0.0;
    while t <= l.y_max + l.y_step / 2.0 {
        let y = l.py(t);
        cv.rect(l.left, y, l.plot_w, 1.0, 2);
        let label = num(t);
        cv.text(
            l.left - 6.0 - 6.0 * label.len() as f64,
            y - 3.0,
            &label,
            1,
            false,
        );
        t += l.y_step;
    }
    let mut t = 0.0;
    while t <= l.x_max + l.x_step / 2.0 {
        let x = l.px(t);
        cv.rect(x, l.top, 1.0, l.plot_h, 2);
        let label = num(t);
        cv.text(
            x - 3.0 * label.len() as f64,
            l.top + l.plot_h + 6.0,
            &label,
            1,
            false,
        );
        t += l.x_step;
    }
    cv.text(
        6.0,
        l.top + l.plot_h / 2.0 - 3.0 * y_label.len() as f64,
        y_label,
        1,
        true,
    );
    cv.text(
        l.left + l.plot_w / 2.0 - 3.0 * x_label.len() as f64,
        l.top + l.plot_h + 25.0,
        x_label,
        1,
        false,
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = 3 + (i % 7) as u8;
        for run in l.runs(pts) {
            if let [only] = run.as_slice() {
                cv.rect(only.0 - 1.0, only.1 - 1.0, 3.0, 3.0, c);
            }
            for w in run.windows(2) {
                cv.line(w[0], w[1], c);
            }
        }
        let ly = l.top + 10.0 + 18.0 * i as f64;
        let lx = l.left + l.plot_w + 15.0;
        cv.rect(lx, ly - 1.0, 20.0, 3.0, c);
        cv.text(lx + 25.0, ly - 3.0, name, 1, false);
    }
    cv.rect(l.left, l.top, 1.0, l.plot_h, 1);
    cv.rect(l.left, l.top + l.plot_h, l.plot_w, 1.0, 1);
    png(&cv)
}

fn crc32(chunks: &[&[u8]]) -> u32 {
    let mut table = [0u32; 256];
    for (i, e) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *e = c;
    }
    let mut c = 0xFFFF_FFFFu32;
    for b in chunks.iter().flat_map(|s| s.iter()) {
        c = table[((c ^ u32::from(*b)) & 0xFF) as usize] ^ (c >> 8);
    }
    c ^ 0xFFFF_FFFF
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65_521;
        b = (b + a) % 65_521;
    }
    (b << 16) | a
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(&[kind, data]).to_be_bytes());
}

/// A 4-bit paletted PNG; the image data in stored (uncompressed) deflate blocks.
fn png(cv: &Canvas) -> Vec<u8> {
    let row = cv.w.div_ceil(2);
    let mut raw = Vec::with_capacity(cv.h * (row + 1));
    for y in 0..cv.h {
        raw.push(0); // filter: none
        let line = &cv.px[y * cv.w..(y + 1) * cv.w];
        for pair in line.chunks(2) {
            raw.push(pair[0] << 4 | pair.get(1).copied().unwrap_or(0));
        }
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (i, b) in blocks.iter().enumerate() {
        z.push(u8::from(i + 1 == blocks.len()));
        let len = b.len() as u16;
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(b);
    }
    z.extend_from_slice(&adler32(&raw).to_be_bytes());
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&(cv.w as u32).to_be_bytes());
    ihdr.extend_from_slice(&(cv.h as u32).to_be_bytes());
    ihdr.extend_from_slice(&[4, 3, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    let plte: Vec<u8> = PALETTE.iter().flatten().copied().collect();
    chunk(&mut out, b"PLTE", &plte);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}

#[cfg(test)]
mod png_tests {
    use super::*;

    #[test]
    fn checksums() {
        assert_eq!(crc32(&[b"IEND"]), 0xAE42_6082);
        assert_eq!(crc32(&[b"123456789"]), 0xCBF4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    }

    /// Reads back the pixels of a PNG written by [`png`] (stored blocks only).
    pub(super) fn decode(p: &[u8]) -> (usize, usize, Vec<u8>) {
        assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
        let (mut i, mut w, mut h, mut z) = (8, 0, 0, Vec::new());
        while i < p.len() {
            let len = u32::from_be_bytes(p[i..i + 4].try_into().unwrap()) as usize;
            let kind = &p[i + 4..i + 8];
            let data = &p[i + 8..i + 8 + len];
            let crc = u32::from_be_bytes(p[i + 8 + len..i + 12 + len].try_into().unwrap());
            assert_eq!(crc, crc32(&[kind, data]));
            match kind {
                b"IHDR" => {
                    w = u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize;
                    h = u32::from_be_bytes(data[4..8].try_into().unwrap()) as usize;
                    assert_eq!(&data[8..], &[4, 3, 0, 0, 0]);
                }
                b"IDAT" => z.extend_from_slice(data),
                _ => {}
            }
            i += 12 + len;
        }
        let (mut j, mut raw) = (2, Vec::new());
        loop {
            let last = z[j] & 1 == 1;
            let len = u16::from_le_bytes([z[j + 1], z[j + 2]]) as usize;
            assert_eq!(!u16::from_le_bytes([z[j + 3], z[j + 4]]) as usize, len);
            raw.extend_from_slice(&z[j + 5..j + 5 + len]);
            j += 5 + len;
            if last {
                break;
            }
        }
        assert_eq!(
            u32::from_be_bytes(z[j..j + 4].try_into().unwrap()),
            adler32(&raw)
        );
        let row = w.div_ceil(2) + 1;
        assert_eq!(raw.len(), h * row);
        let mut px = Vec::new();
        for y in 0..h {
            assert_eq!(raw[y * row], 0);
            for x in 0..w {
                let b = raw[y * row + 1 + x / 2];
                px.push(if x % 2 == 0 { b >> 4 } else { b & 15 });
            }
        }
        (w, h, px)
    }

    #[test]
    fn a_png_with_its_bars() {
        let p = bars_png("t", "ms", &[("a".into(), 10.0), ("b".into(), 5.0)]);
        let (w, h, px) = decode(&p);
        assert_eq!((w, h), (170, 430));
        // Bar 0 (left 70 + 6, 28 wide) reaches the top of the plot at 10; bar 1 only halfway.
        let at = |x: usize, y: usize| px[y * w + x];
        assert_eq!(at(90, 250), 3);
        assert_eq!(at(90, 60), 3);
        assert_eq!(at(130, 250), 4);
        assert_eq!(at(130, 100), 0);
        assert_eq!(at(70, 200), 1, "y axis");
    }

    #[test]
    fn long_labels_get_room_below_the_axis() {
        let chart = |label: &str| decode(&bar_chart_png("t", "ms", &[Bar::plain(label, 1.0)], ""));
        let (_, short, _) = chart("fiber c=1");
        let (_, twenty, _) = chart(&"x".repeat(20));
        let (_, long, px) = chart(&"x".repeat(30));
        let (_, longer, _) = chart(&"x".repeat(50));
        assert_eq!(short, 430, "as every chart was");
        assert_eq!(twenty, short);
        assert_eq!(long, short + 60, "six pixels a character past 20");
        assert_eq!(longer, short + 72, "at most 32 characters");
        // The 30th character is drawn: ink in its row band (6 px each, from 6 px below the
        // axis at y 300).
        let w = px.len() / long;
        let band = 300 + 6 + 29 * 6..300 + 6 + 30 * 6;
        assert!(
            band.clone().any(|y| (0..w).any(|x| px[y * w + x] == 1)),
            "{band:?}"
        );
    }
}
