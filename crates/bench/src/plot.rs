//! Charts drawn with [plotters]: each figure as SVG (its text left to the viewer's sans-serif
//! font) and as PNG (its text in DejaVu Sans, embedded from `assets/DejaVuSans.ttf`, so a PNG
//! comes out the same on every machine). The CSV beside a chart is its source; this module
//! only draws.
//!
//! A [`Figure`] is a title, a legend (one entry per series, shared by its panels, so a server
//! keeps its colour across panels and figures), one or more [`Panel`]s side by side, and notes
//! under them. A panel is
//! - grouped bars ([`Kind::Grouped`]): a group per category on x (a concurrency, a file), a
//!   bar per series in each, a whisker from the smallest to the largest run;
//! - lines ([`Kind::Lines`]): y against a numeric x, a line per series, whiskers at the points;
//! - stacked bars ([`Kind::Stacked`]): a bar per category split into parts, a colour per part.
//!
//! Any panel may carry horizontal [`Mark`]s (a target, a paper's figure: a dashed line with its
//! label), and grouped bars [`Tick`]s (a short bold line across one bar: where a paper's claim
//! would put it).

use std::io;
use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The font of the PNGs' text (DejaVu Sans; licence in `assets/DejaVuSans.LICENSE`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font is a valid TrueType file (a test draws with it): an error here
        // would leave text undrawn, never a wrong chart.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// A value summarising runs: the median drawn, the smallest and largest run as a whisker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Value {
    pub mid: f64,
    pub range: Option<(f64, f64)>,
}

impl Value {
    /// A value without a whisker.
    pub fn plain(mid: f64) -> Value {
        Value { mid, range: None }
    }

    /// The median of `runs` (the finite ones), with a whisker when there are several; `None`
    /// when there is no finite run.
    pub fn of_runs(runs: &[f64]) -> Option<Value> {
        let mut v: Vec<f64> = runs.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mid = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let range = (n > 1).then(|| (v[0], v[n - 1]));
        Some(Value { mid, range })
    }

    fn top(&self) -> f64 {
        self.range.map_or(self.mid, |(_, hi)| hi.max(self.mid))
    }
}

/// A horizontal dashed line across a panel, labelled at its right end.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub y: f64,
    pub label: String,
}

/// A short bold line across bar `series` of group `group` at `y`; every tick of a figure
/// shares one legend entry, the figure's `tick_label`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tick {
    pub group: usize,
    pub series: usize,
    pub y: f64,
}

/// A series of grouped bars: its name and its value (or none) in each group.
pub type Bars = (String, Vec<Option<Value>>);

/// A line: its name and its points (x, value).
pub type Points = (String, Vec<(f64, Value)>);

/// What a panel draws.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A group of bars per category (`groups`, on x); each series a value (or none) per group.
    Grouped {
        groups: Vec<String>,
        series: Vec<Bars>,
        ticks: Vec<Tick>,
    },
    /// A line per series through its points (x, value), sorted by x.
    Lines { series: Vec<Points> },
    /// A bar per category, each split into the parts' values (stacked in the parts' order).
    Stacked {
        bars: Vec<String>,
        parts: Vec<(String, Vec<f64>)>,
    },
}

/// One panel of a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub kind: Kind,
    pub marks: Vec<Mark>,
    /// Lines only: x on a log scale (counts over orders of magnitude).
    pub log_x: bool,
    /// Lines only: y on a log scale (servers an order of magnitude apart).
    pub log_y: bool,
}

/// A figure: a title, a legend, panels side by side, notes under them.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub title: String,
    pub panels: Vec<Panel>,
    pub notes: Vec<String>,
    /// The legend entry of the panels' ticks (unused without ticks).
    pub tick_label: String,
}

const PANEL_W: u32 = 620;
const PANEL_H: u32 = 400;
const TITLE_H: u32 = 36;
const LEGEND_ROW: u32 = 22;
const NOTE_ROW: u32 = 18;

/// Colours by series name where a name is one the charts use often (a server keeps its colour
/// in every figure); the others by their place. `-off`/`-cache-off` variants are lighter.
fn colour(name: &str, index: usize) -> RGBColor {
    const PALETTE: [RGBColor; 10] = [
        RGBColor(0x4e, 0x79, 0xa7),
        RGBColor(0xf2, 0x8e, 0x2b),
        RGBColor(0xe1, 0x57, 0x59),
        RGBColor(0x76, 0xb7, 0xb2),
        RGBColor(0x59, 0xa1, 0x4f),
        RGBColor(0xed, 0xc9, 0x48),
        RGBColor(0xb0, 0x7a, 0xa1),
        RGBColor(0xff, 0x9d, 0xa7),
        RGBColor(0x9c, 0x75, 0x5f),
        RGBColor(0x79, 0x70, 0x6e),
    ];
    let base = name.split(['-', ' ']).next().unwrap_or(name);
    let c = match base {
        "fiber" => PALETTE[0],
        "thread" => PALETTE[1],
        "process" => PALETTE[2],
        "pipeline" => PALETTE[3],
        "nginx" => PALETTE[4],
        "lighttpd" => PALETTE[5],
        "apache2" => PALETTE[6],
        "h2o" => PALETTE[7],
        "lwan" => PALETTE[8],
        // The pipeline paper's peers.
        "Apache" => PALETTE[9],
        "Tux" => PALETTE[8],
        "open" => PALETTE[6],
        "ratio" => PALETTE[9],
        _ => PALETTE[index % PALETTE.len()],
    };
    if name.contains("-no-") {
        // Darker: the same model with a feature off.
        RGBColor(c.0 / 5 * 3, c.1 / 5 * 3, c.2 / 5 * 3)
    } else if name.ends_with("-off") {
        // Halfway to white.
        RGBColor(c.0 / 2 + 128, c.1 / 2 + 128, c.2 / 2 + 128)
    } else {
        c
    }
}

/// The colour of a stacked bar's part `index`: apart from the series' colours, so a part is
/// never read as a server.
fn part_colour(index: usize) -> RGBColor {
    const PARTS: [RGBColor; 6] = [
        RGBColor(0xba, 0xb0, 0xac),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0x8c, 0x56, 0x4b),
        RGBColor(0x17, 0xbe, 0xcf),
        RGBColor(0xbc, 0xbd, 0x22),
        RGBColor(0x39, 0x3b, 0x79),
    ];
    PARTS[index % PARTS.len()]
}

/// A number for an axis or a label: no more digits than it needs.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A measured x (a client count, a second): whole numbers as such.
fn x_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e9 {
        format!("{x:.0}")
    } else {
        num(x)
    }
}

/// One legend entry: its text and what its swatch is.
enum Swatch {
    Fill(RGBColor),
    Tick,
    Dashed,
}

impl Figure {
    /// The legend: each series (or stacked part) once, in the order the panels name them, and
    /// the ticks' entry where there are ticks.
    fn legend(&self) -> Vec<(String, Swatch)> {
        let mut out: Vec<(String, Swatch)> = Vec::new();
        let mut ticks = false;
        for p in &self.panels {
            let names: Vec<(&String, RGBColor)> = match &p.kind {
                Kind::Grouped {
                    series, ticks: t, ..
                } => {
                    ticks |= !t.is_empty();
                    series
                        .iter()
                        .enumerate()
                        .map(|(i, (n, _))| (n, colour(n, i)))
                        .collect()
                }
                Kind::Lines { series } => series
                    .iter()
                    .enumerate()
                    .map(|(i, (n, _))| (n, colour(n, i)))
                    .collect(),
                Kind::Stacked { parts, .. } => parts
                    .iter()
                    .enumerate()
                    .map(|(i, (n, _))| (n, part_colour(i)))
                    .collect(),
            };
            for (n, c) in names {
                if !out.iter().any(|(m, _)| m == n) {
                    out.push((n.clone(), Swatch::Fill(c)));
                }
            }
        }
        if ticks {
            out.push((self.tick_label.clone(), Swatch::Tick));
        }
        for p in &self.panels {
            for m in &p.marks {
                if !out.iter().any(|(t, _)| *t == m.label) {
                    out.push((m.label.clone(), Swatch::Dashed));
                }
            }
        }
        out
    }

    /// The figure's width: the panels', or more for a long title.
    fn width(&self) -> u32 {
        let title = 24 + (10.5 * self.title.chars().count() as f64) as u32;
        (PANEL_W * self.panels.len().max(1) as u32).max(title)
    }

    fn size(&self, legend_rows: u32) -> (u32, u32) {
        let w = self.width();
        let h =
            TITLE_H + legend_rows * LEGEND_ROW + PANEL_H + NOTE_ROW * self.notes.len() as u32 + 8;
        (w, h)
    }

    /// The figure as an SVG document.
    pub fn svg(&self) -> io::Result<String> {
        register_font();
        let legend = self.legend_layout();
        let mut s = String::new();
        {
            let root = SVGBackend::with_string(&mut s, self.size(legend_rows(&legend)))
                .into_drawing_area();
            self.draw(&root, legend).map_err(to_io)?;
            root.present().map_err(to_io)?;
        }
        Ok(s)
    }

    /// Writes the figure as a PNG to `path`.
    pub fn png(&self, path: &Path) -> io::Result<()> {
        register_font();
        let legend = self.legend_layout();
        let root = BitMapBackend::new(path, self.size(legend_rows(&legend))).into_drawing_area();
        self.draw(&root, legend).map_err(to_io)?;
        root.present().map_err(to_io)
    }

    /// Writes `DIR/STEM.svg` and `DIR/STEM.png`.
    pub fn write(&self, dir: &Path, stem: &str) -> io::Result<()> {
        std::fs::write(dir.join(format!("{stem}.svg")), self.svg()?)?;
        self.png(&dir.join(format!("{stem}.png")))
    }

    /// The legend laid out at the figure's width, left to right and wrapped: each entry with
    /// its x from the left margin and its row.
    fn legend_layout(&self) -> Vec<(String, Swatch, i32, u32)> {
        let width = self.width() - 24;
        let (mut x, mut row) = (0, 0);
        self.legend()
            .into_iter()
            .map(|(text, swatch)| {
                let w = entry_width(&text);
                if x > 0 && x + w > width {
                    row += 1;
                    x = 0;
                }
                let at = x;
                x += w;
                (text, swatch, at as i32, row)
            })
            .collect()
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        legend: Vec<(String, Swatch, i32, u32)>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let rows = legend_rows(&legend);
        root.draw(&Text::new(
            self.title.clone(),
            (12, 8),
            (FAMILY, 19).into_font().color(&BLACK),
        ))?;
        // The legend, under the title.
        for (text, swatch, at, row) in legend {
            let x = 12 + at;
            let y = (TITLE_H + row * LEGEND_ROW) as i32;
            let mid = y + 8;
            match swatch {
                Swatch::Fill(c) => root.draw(&Rectangle::new(
                    [(x, mid - 6), (x + 14, mid + 6)],
                    c.filled(),
                ))?,
                Swatch::Tick => root.draw(&PathElement::new(
                    vec![(x, mid), (x + 14, mid)],
                    BLACK.stroke_width(3),
                ))?,
                Swatch::Dashed => {
                    for dx in [0, 6, 12] {
                        root.draw(&PathElement::new(
                            vec![(x + dx, mid), (x + dx + 3, mid)],
                            BLACK.stroke_width(1),
                        ))?;
                    }
                }
            }
            root.draw(&Text::new(
                text,
                (x + 19, mid),
                (FAMILY, 13)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
        }
        let top = TITLE_H + rows * LEGEND_ROW;
        let body = root.margin(top, 0, 0, 0);
        let (panels, notes) = body.split_vertically(PANEL_H);
        let n = self.panels.len().max(1);
        for (area, p) in panels.split_evenly((1, n)).iter().zip(&self.panels) {
            p.draw(area)?;
        }
        for (i, line) in self.notes.iter().enumerate() {
            notes.draw(&Text::new(
                line.clone(),
                (12, 2 + (i as u32 * NOTE_ROW) as i32),
                (FAMILY, 12).into_font().color(&RGBColor(0x44, 0x44, 0x44)),
            ))?;
        }
        Ok(())
    }
}

/// The rows a laid-out legend takes (one at least).
fn legend_rows(legend: &[(String, Swatch, i32, u32)]) -> u32 {
    legend.last().map_or(1, |e| e.3 + 1)
}

/// The room a legend entry takes: swatch, text (estimated at 6.5 px a character of 13 px
/// DejaVu Sans: the SVG's text is measured by the viewer), gap.
fn entry_width(text: &str) -> u32 {
    19 + (6.5 * text.chars().count() as f64) as u32 + 18
}

fn to_io<E: std::fmt::Debug>(e: E) -> io::Error {
    io::Error::other(format!("drawing a chart: {e:?}"))
}

impl Panel {
    /// The x axis: its range, its labelled points.
    fn x_axis(&self) -> (f64, f64, Vec<(f64, String)>) {
        let cats = |names: &[String]| {
            let n = names.len().max(1) as f64;
            let keys = names
                .iter()
                .enumerate()
                .map(|(i, s)| (i as f64, s.clone()))
                .collect();
            (-0.5, n - 0.5, keys)
        };
        match &self.kind {
            Kind::Grouped { groups, .. } => cats(groups),
            Kind::Stacked { bars, .. } => cats(bars),
            Kind::Lines { series } => {
                let mut xs: Vec<f64> = series
                    .iter()
                    .flat_map(|(_, pts)| pts.iter().map(|p| p.0))
                    .filter(|x| x.is_finite())
                    .collect();
                xs.sort_by(f64::total_cmp);
                xs.dedup();
                let (lo, hi) = match (xs.first(), xs.last()) {
                    (Some(&a), Some(&b)) if b > a => (a, b),
                    (Some(&a), _) => (a - 1.0, a + 1.0),
                    _ => (0.0, 1.0),
                };
                if self.log_x && lo > 0.0 {
                    let f = (hi / lo).powf(0.04);
                    let keys = xs.iter().map(|&x| (x, x_num(x))).collect();
                    return (lo / f, hi * f, keys);
                }
                let pad = (hi - lo) * 0.04;
                let keys = if xs.len() <= 12 && xs.iter().all(|x| x.fract() == 0.0) {
                    xs.iter().map(|&x| (x, x_num(x))).collect()
                } else {
                    let step = tick_step(hi - lo);
                    let mut k = Vec::new();
                    let mut x = (lo / step).ceil() * step;
                    while x <= hi + step * 1e-9 {
                        k.push((x, x_num(x)));
                        x += step;
                    }
                    k
                };
                (lo - pad, hi + pad, keys)
            }
        }
    }

    /// The smallest positive y of the lines' points and whiskers (a log axis' bottom).
    fn y_min_positive(&self) -> Option<f64> {
        let Kind::Lines { series } = &self.kind else {
            return None;
        };
        series
            .iter()
            .flat_map(|(_, pts)| pts.iter())
            .map(|(_, v)| v.range.map_or(v.mid, |(lo, _)| lo.min(v.mid)))
            .filter(|y| y.is_finite() && *y > 0.0)
            .min_by(f64::total_cmp)
    }

    /// The largest y drawn (bars' and whiskers' tops, lines' points, marks, ticks).
    fn y_max(&self) -> f64 {
        let mut m: f64 = 0.0;
        match &self.kind {
            Kind::Grouped { series, ticks, .. } => {
                for (_, vals) in series {
                    for v in vals.iter().flatten() {
                        m = m.max(v.top());
                    }
                }
                for t in ticks {
                    m = m.max(t.y);
                }
            }
            Kind::Lines { series } => {
                for (_, pts) in series {
                    for (_, v) in pts {
                        m = m.max(v.top());
                    }
                }
            }
            Kind::Stacked { bars, parts } => {
                for i in 0..bars.len() {
                    let sum: f64 = parts
                        .iter()
                        .map(|(_, v)| v.get(i).copied().unwrap_or(0.0).max(0.0))
                        .sum();
                    m = m.max(sum);
                }
            }
        }
        for k in &self.marks {
            m = m.max(k.y);
        }
        if !m.is_finite() || m <= 0.0 {
            1.0
        } else {
            m * 1.08
        }
    }

    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let (x0, x1, keys) = self.x_axis();
        let ymax = self.y_max();
        let log_y = self.log_y && matches!(self.kind, Kind::Lines { .. });
        let y_axis = if log_y {
            let lo = self.y_min_positive().unwrap_or(ymax / 100.0) / 1.25;
            let hi = ymax * 1.1;
            let mut keys = Vec::new();
            let mut dec = 10f64.powf(lo.log10().floor());
            while dec <= hi {
                for m in [1.0, 2.0, 5.0] {
                    let k = dec * m;
                    if k >= lo && k <= hi {
                        keys.push(k);
                    }
                }
                dec *= 10.0;
            }
            Axis {
                lo,
                hi,
                keys,
                log: true,
            }
        } else {
            // About six to eight labelled lines.
            let step = tick_step(ymax * 5.0 / 8.0);
            Axis {
                lo: 0.0,
                hi: ymax,
                keys: (0..)
                    .map(|i| f64::from(i) * step)
                    .take_while(|k| *k <= ymax)
                    .collect(),
                log: false,
            }
        };
        let key_xs: Vec<f64> = keys.iter().map(|k| k.0).collect();
        let mut chart = ChartBuilder::on(area)
            .caption(self.title.clone(), (FAMILY, 15))
            .margin(8)
            .margin_right(16)
            .x_label_area_size(44)
            .y_label_area_size(62)
            .build_cartesian_2d(
                Axis {
                    lo: x0,
                    hi: x1,
                    keys: key_xs,
                    log: self.log_x && x0 > 0.0,
                },
                y_axis,
            )?;
        let label_of = |x: &f64| {
            keys.iter()
                .min_by(|a, b| (a.0 - x).abs().total_cmp(&(b.0 - x).abs()))
                .map(|k| k.1.clone())
                .unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(0xe4, 0xe4, 0xe4))
            .x_label_formatter(&label_of)
            .y_label_formatter(&|y| num(*y))
            .x_desc(self.x_label.clone())
            .y_desc(self.y_label.clone())
            .label_style((FAMILY, 12))
            .axis_desc_style((FAMILY, 13))
            .draw()?;
        // A whisker: a vertical line from the smallest to the largest run, capped.
        // On a log x axis the cap is a factor, so it is as wide at every x.
        let log_x = self.log_x && x0 > 0.0 && matches!(self.kind, Kind::Lines { .. });
        let (cap, factor) = ((x1 - x0) * 0.006, (x1 / x0).abs().powf(0.006));
        let ends = move |x: f64| {
            if log_x {
                (x / factor, x * factor)
            } else {
                (x - cap, x + cap)
            }
        };
        let whisker = |x: f64, v: &Value| {
            let (l, r) = ends(x);
            v.range.map(|(lo, hi)| {
                PathElement::new(
                    vec![(l, lo), (r, lo), (x, lo), (x, hi), (l, hi), (r, hi)],
                    BLACK.stroke_width(1),
                )
            })
        };
        match &self.kind {
            Kind::Grouped { series, ticks, .. } => {
                let k = series.len().max(1) as f64;
                let slot = 0.8 / k;
                let centre = |g: usize, s: usize| g as f64 - 0.4 + (s as f64 + 0.5) * slot;
                for (si, (name, vals)) in series.iter().enumerate() {
                    let c = colour(name, si);
                    let finite = vals
                        .iter()
                        .enumerate()
                        .filter_map(|(g, v)| v.filter(|v| v.mid.is_finite()).map(|v| (g, v)));
                    chart.draw_series(finite.clone().map(|(g, v)| {
                        let x = centre(g, si);
                        Rectangle::new(
                            [(x - slot * 0.44, 0.0), (x + slot * 0.44, v.mid)],
                            c.filled(),
                        )
                    }))?;
                    chart.draw_series(finite.filter_map(|(g, v)| whisker(centre(g, si), &v)))?;
                }
                chart.draw_series(ticks.iter().map(|t| {
                    let x = centre(t.group, t.series);
                    PathElement::new(
                        vec![(x - slot * 0.5, t.y), (x + slot * 0.5, t.y)],
                        BLACK.stroke_width(3),
                    )
                }))?;
            }
            Kind::Lines { series } => {
                for (si, (name, pts)) in series.iter().enumerate() {
                    let c = colour(name, si);
                    let pts: Vec<(f64, Value)> = pts
                        .iter()
                        .copied()
                        .filter(|(x, v)| x.is_finite() && v.mid.is_finite())
                        .collect();
                    chart.draw_series(LineSeries::new(
                        pts.iter().map(|(x, v)| (*x, v.mid)),
                        c.stroke_width(2),
                    ))?;
                    if pts.len() <= 40 {
                        chart.draw_series(
                            pts.iter()
                                .map(|(x, v)| Circle::new((*x, v.mid), 3, c.filled())),
                        )?;
                    }
                    chart.draw_series(pts.iter().filter_map(|(x, v)| whisker(*x, v)))?;
                }
            }
            Kind::Stacked { bars, parts } => {
                for i in 0..bars.len() {
                    let mut base = 0.0;
                    for (pi, (_, vals)) in parts.iter().enumerate() {
                        let v = vals.get(i).copied().unwrap_or(0.0);
                        if !(v.is_finite() && v > 0.0) {
                            continue;
                        }
                        let x = i as f64;
                        chart.draw_series(std::iter::once(Rectangle::new(
                            [(x - 0.3, base), (x + 0.3, base + v)],
                            part_colour(pi).filled(),
                        )))?;
                        base += v;
                    }
                }
            }
        }
        for m in &self.marks {
            chart.draw_series(DashedLineSeries::new(
                [(x0, m.y), (x1, m.y)],
                6,
                4,
                BLACK.stroke_width(1),
            ))?;
        }
        Ok(())
    }
}

/// A linear x axis whose labelled points are given (a category's place, a measured x).
struct Axis {
    lo: f64,
    hi: f64,
    keys: Vec<f64>,
    log: bool,
}

impl Ranged for Axis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let r = if self.log {
            (v.max(self.lo).ln() - self.lo.ln())
                / (self.hi.ln() - self.lo.ln()).max(f64::MIN_POSITIVE)
        } else {
            (v - self.lo) / (self.hi - self.lo).max(f64::MIN_POSITIVE)
        };
        limit.0 + (r * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.max_num_points() == 0 {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// A round step for about five ticks over a span of `max`.
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

/// Lines of `(x, y)` points, one per named series.
pub type Series = (String, Vec<(f64, f64)>);

impl Figure {
    /// A figure of one panel of lines without whiskers (`weft-bench plot`, time series).
    pub fn lines(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> Figure {
        Figure {
            title: title.into(),
            panels: vec![Panel {
                title: String::new(),
                x_label: x_label.into(),
                y_label: y_label.into(),
                kind: plain_lines(series),
                marks: Vec::new(),
                log_x: false,
                log_y: false,
            }],
            notes: Vec::new(),
            tick_label: String::new(),
        }
    }
}

/// Lines of `(x, y)` points, one per named series, without whiskers.
pub fn plain_lines(series: &[(String, Vec<(f64, f64)>)]) -> Kind {
    Kind::Lines {
        series: series
            .iter()
            .map(|(n, pts)| {
                (
                    n.clone(),
                    pts.iter().map(|&(x, y)| (x, Value::plain(y))).collect(),
                )
            })
            .collect(),
    }
}

/// The text of every `<text>` element of an SVG this module wrote, trimmed (the backend puts
/// the text on a line of its own).
#[cfg(test)]
pub(crate) fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grouped() -> Figure {
        Figure {
            title: "requests/s <and> CPU".into(),
            panels: vec![Panel {
                title: "req/s".into(),
                x_label: "concurrency".into(),
                y_label: "requests/s".into(),
                kind: Kind::Grouped {
                    groups: vec!["c=1".into(), "c=10".into()],
                    series: vec![
                        (
                            "fiber".into(),
                            vec![Value::of_runs(&[1.0, 2.0, 3.0]), Value::of_runs(&[4.0])],
                        ),
                        ("thread".into(), vec![None, Value::of_runs(&[2.0, 2.5])]),
                    ],
                    ticks: vec![Tick {
                        group: 1,
                        series: 0,
                        y: 3.0,
                    }],
                },
                marks: vec![Mark {
                    y: 3.5,
                    label: "target".into(),
                }],
                log_x: false,
                log_y: false,
            }],
            notes: vec!["bars: median of 3 runs".into()],
            tick_label: "paper: thread x 1.5".into(),
        }
    }

    #[test]
    fn a_value_is_the_median_with_the_runs_range() {
        let v = Value::of_runs(&[3.0, 1.0, f64::NAN, 2.0, 10.0]).unwrap();
        assert_eq!((v.mid, v.range), (2.5, Some((1.0, 10.0))));
        assert_eq!(Value::of_runs(&[4.0]), Some(Value::plain(4.0)));
        assert_eq!(Value::of_runs(&[f64::NAN]), None);
    }

    #[test]
    fn the_svg_is_a_document_with_a_legend_entry_per_series_and_the_tick() {
        let svg = grouped().svg().unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let texts = svg_texts(&svg);
        for entry in [
            "fiber",
            "thread",
            "paper: thread x 1.5",
            "target",
            "concurrency",
        ] {
            assert!(texts.iter().any(|t| t == entry), "{entry}: {texts:?}");
        }
        // Text is escaped.
        assert!(svg.contains("requests/s &lt;and&gt; CPU"), "{svg}");
        // Three bars drawn (thread at c=1 has none), in the series' colours.
        assert_eq!(
            svg.matches("fill=\"#4E79A7\"").count(),
            1 + 2,
            "swatch + 2 bars"
        );
        assert_eq!(
            svg.matches("fill=\"#F28E2B\"").count(),
            1 + 1,
            "swatch + 1 bar"
        );
    }

    #[test]
    fn a_png_is_written_with_the_embedded_font() {
        let dir = std::env::temp_dir().join(format!("weft-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        grouped().write(&dir, "g").unwrap();
        let png = std::fs::read(dir.join("g.png")).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert!(std::fs::read_to_string(dir.join("g.svg"))
            .unwrap()
            .contains("fiber"));
        std::fs::remove_dir_all(&dir).unwrap();
        // The font parses (a font that did not would leave every label undrawn).
        assert!(plotters::style::register_font("weft-test", FontStyle::Normal, FONT).is_ok());
    }

    #[test]
    fn lines_and_stacked_bars_draw_every_series_and_part() {
        let fig = Figure {
            title: "t".into(),
            panels: vec![
                Panel {
                    title: "lines".into(),
                    x_label: "clients".into(),
                    y_label: "ms".into(),
                    kind: plain_lines(&[
                        ("process".into(), vec![(1.0, 2.0), (4.0, 8.0)]),
                        ("lwan".into(), vec![(1.0, 1.0), (4.0, f64::NAN)]),
                    ]),
                    marks: vec![],
                    log_x: false,
                    log_y: false,
                },
                Panel {
                    title: "stacked".into(),
                    x_label: String::new(),
                    y_label: "ms".into(),
                    kind: Kind::Stacked {
                        bars: vec!["CGI".into(), "in-process".into()],
                        parts: vec![
                            ("head".into(), vec![0.1, 0.1]),
                            ("handler".into(), vec![2.0, 0.05]),
                        ],
                    },
                    marks: vec![],
                    log_x: false,
                    log_y: false,
                },
            ],
            notes: vec![],
            tick_label: String::new(),
        };
        let svg = fig.svg().unwrap();
        let texts = svg_texts(&svg);
        for entry in [
            "process",
            "lwan",
            "head",
            "handler",
            "CGI",
            "in-process",
            "clients",
        ] {
            assert!(texts.iter().any(|t| t == entry), "{entry}: {texts:?}");
        }
        let legend: Vec<String> = fig.legend().into_iter().map(|e| e.0).collect();
        assert_eq!(legend, ["process", "lwan", "head", "handler"]);
    }

    #[test]
    fn numbers_and_steps_are_round() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(0.1234), "0.123");
        assert_eq!(num(2.5), "2.50");
        assert_eq!(num(42.25), "42.2");
        assert_eq!(num(950.0), "950");
        assert_eq!(num(20689.0), "21k");
        assert_eq!(num(2_500_000.0), "2.5M");
        assert_eq!(tick_step(100.0), 20.0);
        assert_eq!(tick_step(0.0), 1.0);
        assert_eq!(colour("fiber", 5), colour("fiber", 0));
        assert_ne!(colour("thread-cache-off", 0), colour("thread-cache-on", 0));
    }
}
