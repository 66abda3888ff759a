//! The charts of the `threads-cache`, `fibers`, `cgi`, `specweb` and `h2` experiments, drawn from
//! their `rows.csv` (every run of every point): by the experiment when it has run, and again
//! by `weft-bench replot DIR` for results written before the charts had whiskers, so a chart
//! and the rows beside it always agree.

use std::fs;
use std::path::{Path, PathBuf};

use super::written_by_quick_run;
use crate::plot::{Bars, Figure, Kind, Mark, Panel, Points, Tick, Value};
use crate::target::BadInput;

/// A `rows.csv` read back: its column names and each row's cells.
#[derive(Debug)]
pub struct Rows {
    cols: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Rows {
    /// Parses CSV text whose first line names the columns (cells hold no commas or quotes:
    /// the experiments write numbers and names).
    pub fn parse(text: &str) -> Result<Rows, BadInput> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header = lines
            .next()
            .ok_or_else(|| BadInput("rows.csv is empty".into()))?;
        let cols: Vec<String> = header.split(',').map(|c| c.trim().to_string()).collect();
        let mut rows = Vec::new();
        for (i, line) in lines.enumerate() {
            let cells: Vec<String> = line.split(',').map(|c| c.trim().to_string()).collect();
            if cells.len() != cols.len() {
                return Err(BadInput(format!(
                    "rows.csv line {}: {} cells where the header names {}",
                    i + 2,
                    cells.len(),
                    cols.len()
                )));
            }
            rows.push(cells);
        }
        Ok(Rows { cols, rows })
    }

    fn col(&self, name: &str) -> Result<usize, BadInput> {
        self.cols
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| BadInput(format!("rows.csv has no column {name:?}")))
    }

    /// The values of column `name`, each once, in the order they first appear.
    pub fn distinct(&self, name: &str) -> Result<Vec<String>, BadInput> {
        let c = self.col(name)?;
        let mut out: Vec<String> = Vec::new();
        for r in &self.rows {
            if !out.contains(&r[c]) {
                out.push(r[c].clone());
            }
        }
        Ok(out)
    }

    /// The rows whose columns `keys` hold the given cells.
    fn matching<'a>(
        &'a self,
        keys: &[(&str, &'a str)],
    ) -> Result<impl Iterator<Item = &'a Vec<String>> + 'a, BadInput> {
        let keys = keys
            .iter()
            .map(|&(k, want)| Ok((self.col(k)?, want)))
            .collect::<Result<Vec<_>, BadInput>>()?;
        Ok(self
            .rows
            .iter()
            .filter(move |r| keys.iter().all(|&(k, want)| r[k] == want)))
    }

    /// Column `value` of every row whose columns `keys` hold the given cells (one value a
    /// run); a cell that is not a number is left out.
    pub fn values(&self, keys: &[(&str, &str)], value: &str) -> Result<Vec<f64>, BadInput> {
        let v = self.col(value)?;
        Ok(self
            .matching(keys)?
            .filter_map(|r| r[v].parse::<f64>().ok())
            .collect())
    }

    /// Columns `a` and `b` of every row whose columns `keys` hold the given cells, where both
    /// are numbers.
    pub fn pairs(
        &self,
        keys: &[(&str, &str)],
        a: &str,
        b: &str,
    ) -> Result<Vec<(f64, f64)>, BadInput> {
        let (ai, bi) = (self.col(a)?, self.col(b)?);
        Ok(self
            .matching(keys)?
            .filter_map(|r| Some((r[ai].parse::<f64>().ok()?, r[bi].parse::<f64>().ok()?)))
            .collect())
    }

    /// The number of runs: the largest `run`.
    pub fn runs(&self) -> Result<usize, BadInput> {
        let c = self.col("run")?;
        Ok(self
            .rows
            .iter()
            .filter_map(|r| r[c].parse::<usize>().ok())
            .max()
            .unwrap_or(0))
    }
}

/// One chart: `STEM.png` and `STEM.svg`.
#[derive(Debug)]
pub struct Chart {
    pub stem: String,
    pub figure: Figure,
}

/// How a set of charts is labelled: the runs behind each value, and whether a quick run (a
/// smoke check) wrote them.
#[derive(Debug, Clone, Copy)]
pub struct Label {
    pub runs: usize,
    pub quick: bool,
}

impl Label {
    fn title(&self, t: &str) -> String {
        if self.quick {
            format!("{t} (quick run: a smoke check, not a measurement)")
        } else {
            t.to_string()
        }
    }

    fn notes(&self, more: &[&str]) -> Vec<String> {
        let mut v = vec![if self.runs > 1 {
            format!(
                "Bars and points: median of {} runs; whiskers: smallest to largest run.",
                self.runs
            )
        } else {
            "One run.".to_string()
        }];
        v.extend(more.iter().map(|s| s.to_string()));
        v
    }

    fn figure(&self, title: &str, panels: Vec<Panel>, notes: &[&str]) -> Figure {
        Figure {
            title: self.title(title),
            panels,
            notes: self.notes(notes),
            tick_label: String::new(),
        }
    }
}

fn panel(title: &str, x_label: &str, y_label: &str, kind: Kind) -> Panel {
    Panel {
        title: title.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        kind,
        marks: Vec::new(),
        log_x: false,
        log_y: false,
    }
}

/// Series of grouped bars: for each of `series` (column `scol`), its value of `measure` in
/// each group (column `gcol`), the rows also matching `fixed`; a series without any value is
/// left out.
fn grouped(
    rows: &Rows,
    fixed: &[(&str, &str)],
    (scol, series): (&str, &[String]),
    (gcol, groups): (&str, &[String]),
    measure: &str,
) -> Result<Vec<Bars>, BadInput> {
    let mut out = Vec::new();
    for s in series {
        let mut vals = Vec::new();
        for g in groups {
            let mut keys = fixed.to_vec();
            keys.push((scol, s));
            keys.push((gcol, g));
            vals.push(Value::of_runs(&rows.values(&keys, measure)?));
        }
        if vals.iter().any(Option::is_some) {
            out.push((s.clone(), vals));
        }
    }
    Ok(out)
}

/// Lines: for each of `series` (column `scol`), its value of `measure` at each x (column
/// `xcol`, numeric), the rows also matching `fixed`: [`grouped`]'s values, at their x.
fn lines(
    rows: &Rows,
    fixed: &[(&str, &str)],
    (scol, series): (&str, &[String]),
    (xcol, xs): (&str, &[String]),
    measure: &str,
) -> Result<Vec<Points>, BadInput> {
    Ok(grouped(rows, fixed, (scol, series), (xcol, xs), measure)?
        .into_iter()
        .filter_map(|(name, vals)| {
            let mut pts: Vec<(f64, Value)> = xs
                .iter()
                .zip(vals)
                .filter_map(|(x, v)| Some((x.parse::<f64>().ok()?, v?)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (!pts.is_empty()).then_some((name, pts))
        })
        .collect())
}

/// The median of one series in one group, where it is there.
fn mid_of(series: &[Bars], name: &str, group: usize) -> Option<f64> {
    series
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.get(group).copied().flatten())
        .map(|v| v.mid)
}

/// Ticks over the fiber bars at `factor` times the thread bar, in the groups of `groups`
/// whose concurrency is at least `from` (the paper's claims hold "if the concurrency is at
/// least 5").
fn claim_ticks(series: &[Bars], groups: &[String], from: f64, factor: f64) -> Vec<Tick> {
    let Some(fi) = series.iter().position(|(n, _)| n == "fiber") else {
        return Vec::new();
    };
    groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.parse::<f64>().is_ok_and(|c| c >= from))
        .filter_map(|(gi, _)| {
            mid_of(series, "thread", gi).map(|t| Tick {
                group: gi,
                series: fi,
                y: t * factor,
            })
        })
        .collect()
}

/// The paper's claims for the fiber server against the thread server, by path and link:
/// (throughput factor, CPU utilisation factor over the 10 Mbit link).
fn fibers_claims(path: &str, shaped: bool) -> (f64, &'static str, Option<(f64, &'static str)>) {
    let echo = path == "/echo";
    match (shaped, echo) {
        // Figure 8: a local client, at 100% CPU.
        (false, true) => (
            1.5,
            "the paper (figure 8): fiber = thread x 1.50 (+50%)",
            None,
        ),
        (false, false) => (
            1.26,
            "the paper (figure 8): fiber = thread x 1.26 (+26%)",
            None,
        ),
        // Figures 9 and 10: over 10 Mbit/s, CPU about 40% against 80%; throughput about 30%
        // higher on the echo, the same on the page.
        (true, e) => (
            if e { 1.3 } else { 1.0 },
            if e {
                "the paper (figures 9, 10): fiber = thread x 1.30 req/s, x 0.5 CPU (40% vs 80%)"
            } else {
                "the paper (figures 9, 10): fiber = thread x 1.00 req/s, x 0.5 CPU (40% vs 80%)"
            },
            Some((0.5, "")),
        ),
    }
}

/// fibers: a figure per path, the paper's figures 8-10: requests/s and server CPU per request
/// grouped by concurrency (1, 10, 50), a colour per server, ticks where the paper's claims
/// put the fiber server against the thread server; over a shaped link (`shaped`) a third
/// panel, server CPU utilisation (figure 9).
pub fn fibers(
    rows: &Rows,
    servers: &[String],
    path: &str,
    conns: &[String],
    shaped: bool,
    label: Label,
) -> Result<Chart, BadInput> {
    let groups: Vec<String> = conns.to_vec();
    let fixed = [("path", path)];
    let rps = grouped(rows, &fixed, ("server", servers), ("conns", conns), "rps")?;
    let cpu = grouped(
        rows,
        &fixed,
        ("server", servers),
        ("conns", conns),
        "cpu_us_per_req",
    )?;
    let (factor, claim, util_claim) = fibers_claims(path, shaped);
    let rps_ticks = claim_ticks(&rps, &groups, 5.0, factor);
    let mut panels = vec![
        panel(
            "requests/s (higher is better)",
            "concurrency (ab -c)",
            "requests/s",
            Kind::Grouped {
                groups: groups.clone(),
                series: rps,
                ticks: rps_ticks,
            },
        ),
        panel(
            "server CPU per request (lower is better)",
            "concurrency (ab -c)",
            "microseconds of CPU",
            Kind::Grouped {
                groups: groups.clone(),
                series: cpu,
                ticks: Vec::new(),
            },
        ),
    ];
    if let Some((f, _)) = util_claim {
        let util = grouped(
            rows,
            &fixed,
            ("server", servers),
            ("conns", conns),
            "server_cpu_pct",
        )?;
        let ticks = claim_ticks(&util, &groups, 5.0, f);
        panels.push(panel(
            "server CPU utilisation (lower is better)",
            "concurrency (ab -c)",
            "% of one core",
            Kind::Grouped {
                groups: groups.clone(),
                series: util,
                ticks,
            },
        ));
    }
    let link = if shaped {
        "over a 10 Mbit/s link"
    } else {
        "local client"
    };
    let mut figure = label.figure(
        &format!("fibers, {path}, a connection per request, {link}"),
        panels,
        &["Concurrency: connections at once (ab -c); the paper's claims hold from 5."],
    );
    figure.tick_label = claim.to_string();
    Ok(Chart {
        stem: path.trim_start_matches('/').replace('.', "_"),
        figure,
    })
}

/// threads-cache: a figure per file, the paper's figures 1.2 and 2.1: mean completion time
/// against concurrent requests, a line per server; the left panel the servers as the paper
/// compared them (threaded, forked, with their caches on, and the peers), the right each
/// weft model with its response cache on and off.
pub fn threads_cache(
    rows: &Rows,
    servers: &[String],
    file: &str,
    label: Label,
) -> Result<Chart, BadInput> {
    let mut xs = rows.distinct("concurrency")?;
    xs.sort_by_key(|x| x.parse::<u64>().unwrap_or(u64::MAX));
    let fixed = [("file", file)];
    let main: Vec<String> = servers
        .iter()
        .filter(|s| !s.ends_with("-cache-off"))
        .cloned()
        .collect();
    let cache: Vec<String> = servers
        .iter()
        .filter(|s| s.contains("-cache-"))
        .cloned()
        .collect();
    let x_label = "concurrent GETs per group, from each of the 2 clients";
    let a = lines(
        rows,
        &fixed,
        ("server", &main),
        ("concurrency", &xs),
        "avg_ms",
    )?;
    let b = lines(
        rows,
        &fixed,
        ("server", &cache),
        ("concurrency", &xs),
        "avg_ms",
    )?;
    let mut panels = vec![
        panel(
            "threaded vs forked (the paper's figure 1.2)",
            x_label,
            "ms, connect to last byte (log scale)",
            Kind::Lines { series: a },
        ),
        panel(
            "response cache on and off (the paper's figure 2.1)",
            x_label,
            "ms, connect to last byte (log scale)",
            Kind::Lines { series: b },
        ),
    ];
    for p in &mut panels {
        // The forked server is an order of magnitude above the others.
        p.log_y = true;
    }
    let figure = label.figure(
        &format!("threads-cache, {file}: mean completion time (lower is better)"),
        panels,
        &["Each client: sequential groups of concurrent GETs, a fresh connection each (the paper: 20 groups of 12)."],
    );
    Ok(Chart {
        stem: file.trim_start_matches("/files/").replace('.', "_"),
        figure,
    })
}

/// The way a cgi path is: CGI, the in-process function, FastCGI.
pub fn cgi_way(path: &str) -> &str {
    match path {
        "/cgi-bin/Echo2" => "CGI",
        "/echo" => "in-process",
        "/fcgi/echo.php" => "FastCGI",
        "/proxy/echo" => "proxy",
        other => other,
    }
}

/// The parts of a request's time the cgi chart stacks, in order.
pub const CGI_PARTS: [&str; 5] = [
    "outside the server (client, connect, kernel)",
    "head read and parsed",
    "body read",
    "handler (CGI: fork, exec, the script up to its head; proxy: the upstream's answer)",
    "response out (CGI: the rest of the script's output)",
];

/// The paper's time line (its figure 1.2, section 1.2; ms of the 202): outside the server
/// 202 - 183; parsing the head 183 - 140; the body read 122; fork about 9 and the script about
/// 7 (as the handler); the rest of the server's time (as the response).
const CGI_PAPER_MS: [f64; 5] = [19.0, 43.0, 122.0, 16.0, 2.0];

/// cgi: where a request's time goes (the paper's figure 1.2), stacked per way: the paper's
/// CERN httpd, then each way on the fiber model from its `[timing]` phases (`*_us` columns:
/// means over the run's requests, from the status JSON); and the mean time of every server
/// and way.
pub fn cgi(rows: &Rows, servers: &[String], label: Label) -> Result<Chart, BadInput> {
    let paths = rows.distinct("path")?;
    let ways: Vec<String> = paths.iter().map(|p| cgi_way(p).to_string()).collect();
    let mut panels = vec![panel(
        "the paper: CERN httpd, 1995 (ms)",
        "",
        "ms per request",
        Kind::Stacked {
            bars: vec!["CGI".into()],
            parts: CGI_PARTS
                .iter()
                .zip(CGI_PAPER_MS)
                .map(|(n, v)| (n.to_string(), vec![v]))
                .collect(),
        },
    )];
    let model = servers
        .iter()
        .find(|s| s.as_str() == "fiber")
        .or_else(|| servers.first())
        .cloned()
        .unwrap_or_default();
    let has_phases = rows.cols.iter().any(|c| c == "head_us");
    if has_phases {
        let mut parts: Vec<(String, Vec<f64>)> = CGI_PARTS
            .iter()
            .map(|n| (n.to_string(), Vec::new()))
            .collect();
        let mut bars = Vec::new();
        for p in &paths {
            let m = |col: &str| -> Result<f64, BadInput> {
                Ok(
                    Value::of_runs(&rows.values(&[("server", &model), ("path", p)], col)?)
                        .map_or(f64::NAN, |v| v.mid),
                )
            };
            let total = m("mean_ms")?;
            let (head, body, handler, out) = (
                m("head_us")? / 1e3,
                m("body_us")? / 1e3,
                m("handler_us")? / 1e3,
                m("out_us")? / 1e3,
            );
            if !(total.is_finite() && head.is_finite()) {
                continue;
            }
            let inside = head + body + handler + out;
            bars.push(cgi_way(p).to_string());
            for (part, v) in
                parts
                    .iter_mut()
                    .zip([(total - inside).max(0.0), head, body, handler, out])
            {
                part.1.push(v);
            }
        }
        if !bars.is_empty() {
            panels.push(panel(
                &format!("weft, {model} model: where the time goes (ms)"),
                "",
                "ms per request",
                Kind::Stacked { bars, parts },
            ));
        }
    }
    let series = grouped(rows, &[], ("server", servers), ("path", &paths), "mean_ms")?;
    panels.push(panel(
        "every server: mean time (lower is better)",
        "",
        "ms per request",
        Kind::Grouped {
            groups: ways,
            series,
            ticks: Vec::new(),
        },
    ));
    let figure = label.figure(
        "cgi: the paper's POST (542-byte body), a connection per request",
        panels,
        &[
            "Stacked: the medians of the runs' means. The server's parts are weft's [timing] phases; \
             outside the server is the client's mean less them.",
            "The paper's parts: its experiments 1-7 (202 ms; fork 9 ms and script 7 ms as the handler).",
        ],
    );
    Ok(Chart {
        stem: "cgi".into(),
        figure,
    })
}

/// The report's paragraph on the cgi chart's middle panel: each way's parts, in microseconds;
/// empty without phases.
pub fn cgi_breakdown(chart: &Chart) -> String {
    let Some((title, bars, parts)) = chart.figure.panels.iter().find_map(|p| match &p.kind {
        Kind::Stacked { bars, parts } if p.title.starts_with("weft") => {
            Some((&p.title, bars, parts))
        }
        _ => None,
    }) else {
        return String::new();
    };
    let model = title
        .strip_prefix("weft, ")
        .and_then(|t| t.split(':').next())
        .unwrap_or(title);
    let mut md = format!(
        "Where a request's time goes on weft's {model} (the figure's middle panel; weft's \
         models run with `--timing --status` here, and each phase's mean over a run is read \
         from the status JSON before and after it; medians of the runs):\n\n"
    );
    for (i, way) in bars.iter().enumerate() {
        let total: f64 = parts.iter().map(|(_, v)| v[i]).sum();
        let each: Vec<String> = parts
            .iter()
            .map(|(n, v)| {
                let us = v[i] * 1e3;
                if us < 10.0 {
                    format!("{n} {us:.1} us")
                } else {
                    format!("{n} {us:.0} us")
                }
            })
            .collect();
        md.push_str(&format!("- {way}, {total:.3} ms: {}\n", each.join("; ")));
    }
    md.push_str(
        "\nThe paper's 202 ms went to reading the body (122 ms) and parsing the head (43 ms); \
         here both take microseconds, and CGI's time is the fork, the exec and the script.\n\n",
    );
    md
}

/// The paper's SPECweb99 results (its tables 1-3): mean response ms and operations/s at 300,
/// 600 and 1000 connections.
const SPECWEB_PAPER: [(&str, [f64; 3], [f64; 3]); 3] = [
    (
        "Apache (paper)",
        [382.2, 758.2, 1247.2],
        [765.0, 769.0, 750.0],
    ),
    (
        "Tux (paper)",
        [320.4, 456.1, 791.1],
        [907.0, 1296.0, 1244.0],
    ),
    (
        "open KETA (paper)",
        [307.0, 352.4, 437.7],
        [954.0, 1702.0, 2285.0],
    ),
];

/// specweb: throughput and mean response time against connections, a line per server, and
/// the paper's response times beside them.
pub fn specweb(rows: &Rows, servers: &[String], label: Label) -> Result<Chart, BadInput> {
    let clients = rows.distinct("clients")?;
    let ops = lines(
        rows,
        &[],
        ("server", servers),
        ("clients", &clients),
        "ops_per_s",
    )?;
    let resp = lines(
        rows,
        &[],
        ("server", servers),
        ("clients", &clients),
        "mean_response_ms",
    )?;
    let paper = |i: usize| -> Vec<Points> {
        SPECWEB_PAPER
            .iter()
            .map(|(n, r, o)| {
                let v = if i == 0 { r } else { o };
                (
                    n.to_string(),
                    [300.0, 600.0, 1000.0]
                        .iter()
                        .zip(v)
                        .map(|(&x, &y)| (x, Value::plain(y)))
                        .collect(),
                )
            })
            .collect()
    };
    let figure = label.figure(
        "specweb: SPECweb99-like static load",
        vec![
            panel(
                "operations/s (the load is paced: all conform)",
                "connections",
                "operations/s",
                Kind::Lines { series: ops },
            ),
            panel(
                "mean response time, loopback (lower is better)",
                "connections",
                "ms",
                Kind::Lines { series: resp },
            ),
            panel(
                "the paper: mean response time, 1 Gbit/s",
                "connections",
                "ms",
                Kind::Lines { series: paper(0) },
            ),
        ],
        &["pipeline-off: the pipeline with its thread-allocation controller off (a fixed allocation)."],
    );
    Ok(Chart {
        stem: "response".into(),
        figure,
    })
}

/// The pipeline's stages, in `allocation.csv`'s columns.
pub const STAGES: [&str; 4] = ["accept", "receive", "process", "send"];

/// specweb's `allocation.csv` (the pipeline's threads per stage, each second of each run, from
/// its status JSON history): a panel per connection count, a line per stage, over run 1.
pub fn allocation(alloc: &Rows, label: Label) -> Result<Chart, BadInput> {
    let mut panels = Vec::new();
    for c in alloc.distinct("clients")? {
        let series = STAGES
            .iter()
            .map(|st| {
                let pts = alloc.pairs(&[("clients", &c), ("run", "1")], "t_s", st)?;
                Ok((
                    format!("{st} threads"),
                    pts.into_iter().map(|(x, y)| (x, Value::plain(y))).collect(),
                ))
            })
            .collect::<Result<Vec<_>, BadInput>>()?;
        panels.push(panel(
            &format!("{c} connections"),
            "seconds into the run",
            "threads",
            Kind::Lines { series },
        ));
    }
    let figure = Label { runs: 1, ..label }.figure(
        "specweb: the pipeline's thread allocation over time (controller on)",
        panels,
        &["Each second's sample of the pipeline's threads per stage (status JSON history), run 1; \
           stages with the same count draw one over the other."],
    );
    Ok(Chart {
        stem: "allocation".into(),
        figure,
    })
}

/// h2's measures drawn, by their `rows.csv` column: a chart of each per connection count.
pub const H2_MEASURES: [&str; 3] = ["rps", "cpu_us_per_req", "p99_ms"];

/// h2: for `conns` connections, `measure` (one of [`H2_MEASURES`]) grouped by streams per
/// connection, a colour per server.
pub fn h2(
    rows: &Rows,
    servers: &[String],
    conns: &str,
    streams: &[String],
    measure: &str,
    label: Label,
) -> Result<Chart, BadInput> {
    let (stem, what, unit) = match measure {
        "rps" => ("rps", "requests/s (higher is better)", "requests/s"),
        "cpu_us_per_req" => (
            "cpu",
            "server CPU per request (lower is better)",
            "microseconds",
        ),
        "p99_ms" => ("p99", "p99 latency (lower is better)", "ms"),
        other => return Err(BadInput(format!("h2: no chart of {other:?}"))),
    };
    let series = grouped(
        rows,
        &[("conns", conns)],
        ("server", servers),
        ("streams", streams),
        measure,
    )?;
    let figure = label.figure(
        &format!("h2: {conns} connections x m streams, {what}"),
        vec![panel(
            "",
            "concurrent streams per connection (m)",
            unit,
            Kind::Grouped {
                groups: streams.to_vec(),
                series,
                ticks: Vec::new(),
            },
        )],
        &[],
    );
    Ok(Chart {
        stem: format!("{stem}_c{conns}"),
        figure,
    })
}

/// tls: a chart per measure, a bar per server, and the target drawn as a line: at
/// `factor` times nginx's (or at `bytes` for the idle memory).
pub fn tls(rows: &Rows, idle: Option<&Rows>, label: Label) -> Result<Vec<Chart>, BadInput> {
    let servers = rows.distinct("server")?;
    let one = |scenario: &str, measure: &str| -> Result<Vec<Bars>, BadInput> {
        let mut out = Vec::new();
        for s in &servers {
            let v =
                Value::of_runs(&rows.values(&[("server", s), ("scenario", scenario)], measure)?);
            if v.is_some() {
                out.push((s.clone(), vec![v]));
            }
        }
        Ok(out)
    };
    let nginx_mark = |series: &[Bars], factor: f64, what: &str| {
        mid_of(series, "nginx", 0)
            .map(|n| Mark {
                y: n * factor,
                label: format!("target: {what} <= {factor:.1}x nginx's"),
            })
            .into_iter()
            .collect::<Vec<_>>()
    };
    let bars = |title: &str, unit: &str, series: Vec<Bars>, marks: Vec<Mark>| {
        let mut p = panel(
            "",
            "",
            unit,
            Kind::Grouped {
                groups: vec![String::new()],
                series,
                ticks: Vec::new(),
            },
        );
        p.marks = marks;
        label.figure(title, vec![p], &[])
    };
    let mut out = Vec::new();
    let ka = one("keepalive", "cpu_us_per_req")?;
    let m = nginx_mark(&ka, 1.0, "CPU per request");
    out.push(Chart {
        stem: "keepalive_cpu".into(),
        figure: bars(
            "tls: keep-alive, server CPU per request (lower is better)",
            "microseconds",
            ka,
            m,
        ),
    });
    let hs = one("handshake", "cpu_us_per_req")?;
    let m = nginx_mark(&hs, 0.9, "CPU per connection");
    out.push(Chart {
        stem: "handshake_cpu".into(),
        figure: bars(
            "tls: a full handshake per request, server CPU per connection (lower is better)",
            "microseconds",
            hs,
            m,
        ),
    });
    // Handshakes and resumptions per second, grouped by kind.
    let kinds = vec!["handshake".to_string(), "resumed".to_string()];
    let series = grouped(rows, &[], ("server", &servers), ("scenario", &kinds), "rps")?;
    out.push(Chart {
        stem: "handshakes".into(),
        figure: label.figure(
            "tls: new connections per second (higher is better)",
            vec![panel(
                "",
                "",
                "connections/s",
                Kind::Grouped {
                    groups: vec!["full handshake".into(), "resumed session".into()],
                    series,
                    ticks: Vec::new(),
                },
            )],
            &[],
        ),
    });
    if let Some(idle) = idle {
        let mut series = Vec::new();
        for s in idle.distinct("server")? {
            let v = Value::of_runs(&idle.values(&[("server", &s)], "bytes_per_connection")?);
            if v.is_some() {
                series.push((s, vec![v]));
            }
        }
        out.push(Chart {
            stem: "idle_memory".into(),
            figure: bars(
                "tls: resident memory per idle keep-alive TLS connection (lower is better)",
                "bytes",
                series,
                vec![Mark {
                    y: 8192.0,
                    label: "target: fiber <= 8 KiB".into(),
                }],
            ),
        });
    }
    Ok(out)
}

/// cluster's `scaling.csv`: requests/s of one instance and of three each round, and their
/// ratio with the target (2.7x) drawn.
pub fn cluster_scaling(scaling: &Rows, label: Label) -> Result<Chart, BadInput> {
    let rounds = scaling.distinct("round")?;
    let backends = scaling.distinct("backend")?;
    let series = grouped(
        scaling,
        &[],
        ("backend", &backends),
        ("round", &rounds),
        "rps",
    )?;
    let mut ratios = Vec::new();
    for r in &rounds {
        let get = |b: &str| scaling.values(&[("round", r), ("backend", b)], "rps");
        let (one, three) = (get("one instance")?, get("three instances")?);
        ratios.push(match (one.first(), three.first()) {
            (Some(&o), Some(&t)) if o > 0.0 => Some(Value::plain(t / o)),
            _ => None,
        });
    }
    let mut ratio = panel(
        "three instances over one, each round",
        "round",
        "ratio",
        Kind::Grouped {
            groups: rounds.clone(),
            series: vec![("ratio, three / one".into(), ratios)],
            ticks: Vec::new(),
        },
    );
    ratio.marks = vec![Mark {
        y: crate::cluster::SCALE_TARGET,
        label: format!("target: at least {}x", crate::cluster::SCALE_TARGET),
    }];
    let figure = Figure {
        title: label.title("cluster: three weft instances behind HAProxy against one"),
        panels: vec![
            panel(
                "requests/s through HAProxy",
                "round",
                "requests/s",
                Kind::Grouped {
                    groups: rounds,
                    series,
                    ticks: Vec::new(),
                },
            ),
            ratio,
        ],
        notes: vec!["Each round: one instance, then three, 4 s each, alternating.".into()],
        tick_label: String::new(),
    };
    Ok(Chart {
        stem: "scaling".into(),
        figure,
    })
}

/// Writes `DIR/STEM.svg` and `DIR/STEM.png`; returns the report's line for them.
pub fn draw(dir: &Path, chart: &Chart) -> std::io::Result<String> {
    chart.figure.write(dir, &chart.stem)?;
    let stem = &chart.stem;
    Ok(format!(
        "![{}]({stem}.png) ([SVG]({stem}.svg))\n",
        chart.figure.title
    ))
}

/// The experiment that wrote `dir`: the name its report starts with (`# fibers: ...`).
fn experiment_of(dir: &Path) -> Result<String, BadInput> {
    let report = dir.join("report.md");
    let text =
        fs::read_to_string(&report).map_err(|e| BadInput(format!("{}: {e}", report.display())))?;
    let first = text.lines().next().unwrap_or("");
    first
        .strip_prefix("# ")
        .and_then(|l| l.split(':').next())
        .map(|n| n.trim().to_string())
        .ok_or_else(|| BadInput(format!("{}: no `# NAME:` title line", report.display())))
}

/// Reads `DIR/NAME` as rows; `None` when there is no such file.
fn read_rows(dir: &Path, name: &str) -> Result<Option<Rows>, BadInput> {
    let path = dir.join(name);
    match fs::read_to_string(&path) {
        Ok(text) => Rows::parse(&text)
            .map(Some)
            .map_err(|e| BadInput(format!("{}: {}", path.display(), e.0))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(BadInput(format!("{}: {e}", path.display()))),
    }
}

/// Whether a fibers report is of the run over the shaped link.
fn shaped_link(dir: &Path) -> bool {
    fs::read_to_string(dir.join("report.md")).is_ok_and(|t| t.contains("shaped to"))
}

/// The charts of experiment `name` drawn from the CSVs in `dir` (its servers, files, paths
/// and client counts in the order they first appear).
pub fn charts_of(name: &str, dir: &Path, quick: bool) -> Result<Vec<Chart>, BadInput> {
    let rows = read_rows(dir, "rows.csv")?
        .ok_or_else(|| BadInput(format!("{}: no rows.csv", dir.display())))?;
    let label = Label {
        runs: rows.runs().unwrap_or(1),
        quick,
    };
    let servers = || rows.distinct("server");
    Ok(match name {
        "threads-cache" => {
            let servers = servers()?;
            rows.distinct("file")?
                .iter()
                .map(|f| threads_cache(&rows, &servers, f, label))
                .collect::<Result<Vec<_>, _>>()?
        }
        "fibers" => {
            let (servers, conns) = (servers()?, rows.distinct("conns")?);
            let shaped = shaped_link(dir);
            rows.distinct("path")?
                .iter()
                .map(|p| fibers(&rows, &servers, p, &conns, shaped, label))
                .collect::<Result<Vec<_>, _>>()?
        }
        "cgi" => vec![cgi(&rows, &servers()?, label)?],
        "specweb" => {
            let mut v = vec![specweb(&rows, &servers()?, label)?];
            if let Some(a) = read_rows(dir, "allocation.csv")? {
                v.push(allocation(&a, label)?);
            }
            v
        }
        "h2" => {
            let (servers, streams) = (servers()?, rows.distinct("streams")?);
            let mut v = Vec::new();
            for c in rows.distinct("conns")? {
                for m in H2_MEASURES {
                    v.push(h2(&rows, &servers, &c, &streams, m, label)?);
                }
            }
            v
        }
        "tls" => tls(&rows, read_rows(dir, "idle.csv")?.as_ref(), label)?,
        "cluster" => {
            let mut v = Vec::new();
            if let Some(s) = read_rows(dir, "scaling.csv")? {
                v.push(cluster_scaling(&s, Label { runs: 1, quick })?);
            }
            v.extend(crate::cluster::data::charts_from_rows(&rows, quick)?);
            v
        }
        other => {
            return Err(BadInput(format!(
                "{}: experiment {other:?}: replot draws threads-cache, fibers, cgi, specweb, \
                 h2, tls and cluster",
                dir.display()
            )))
        }
    })
}

/// `weft-bench replot DIR` (and `weft-bench experiment NAME --replot`): draws the charts of
/// the experiment whose results are in `dir` again from its CSVs, under the same file names
/// (the report's links stay right). Returns the files written.
pub fn replot(dir: &Path) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    let name = experiment_of(dir)?;
    let quick = written_by_quick_run(dir) == Some(true);
    let mut written = Vec::new();
    for c in charts_of(&name, dir, quick)? {
        draw(dir, &c)?;
        written.push(dir.join(format!("{}.svg", c.stem)));
        written.push(dir.join(format!("{}.png", c.stem)));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIBERS: &str = "server,path,conns,run,rps,cpu_us_per_req,server_cpu_pct,errors\n\
        fiber,/echo,1,1,100.0,1,1,0\n\
        nginx,/echo,1,1,90.0,1,1,0\n\
        fiber,/echo,1,2,120.0,1,1,0\n\
        nginx,/echo,1,2,80.0,1,1,0\n\
        fiber,/echo,1,3,110.0,1,1,0\n\
        nginx,/echo,1,3,85.0,1,1,0\n\
        fiber,/x.html,1,1,50.0,1,1,0\n\
        lighttpd,/x.html,1,1,40.0,1,1,0\n";

    const LABEL: Label = Label {
        runs: 2,
        quick: false,
    };

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/plots")
    }

    /// A copy of fixture `name` in a fresh temporary folder.
    fn fixture(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-plots-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for e in fs::read_dir(fixtures().join(name)).unwrap() {
            let e = e.unwrap();
            fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
        dir
    }

    /// Checks `svg` is well-formed XML with an `<svg>` root: every tag closed in order, every
    /// `&` an entity.
    fn well_formed(svg: &str) -> Result<(), String> {
        let mut stack: Vec<&str> = Vec::new();
        let mut rest = svg.trim();
        if !rest.starts_with("<svg") {
            return Err("no <svg> root".into());
        }
        while let Some(i) = rest.find('<') {
            let text = &rest[..i];
            for (j, _) in text.match_indices('&') {
                let ent = &text[j..];
                if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&#"]
                    .iter()
                    .any(|e| ent.starts_with(e))
                {
                    return Err(format!("bare & in {text:?}"));
                }
            }
            let end = rest[i..].find('>').ok_or("unclosed tag")? + i;
            let tag = &rest[i + 1..end];
            if tag.starts_with('?') || tag.starts_with('!') {
            } else if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(open) if open == name.trim() => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else if !tag.ends_with('/') {
                stack.push(tag.split_whitespace().next().unwrap_or(""));
            }
            rest = &rest[end + 1..];
            if stack.is_empty() && !rest.trim().is_empty() {
                return Err("content after the root".into());
            }
        }
        if stack.is_empty() {
            Ok(())
        } else {
            Err(format!("unclosed {stack:?}"))
        }
    }

    #[test]
    fn the_checker_refuses_what_is_not_well_formed() {
        assert!(well_formed("<svg a=\"1\"><g><text>x &amp; y</text></g><rect/></svg>").is_ok());
        assert!(well_formed("<svg><g></svg>").is_err());
        assert!(well_formed("<svg><text>a & b</text></svg>").is_err());
        assert!(well_formed("<html></html>").is_err());
        assert!(well_formed("<svg></svg><svg></svg>").is_err());
    }

    #[test]
    fn rows_read_back_by_column() {
        let r = Rows::parse(FIBERS).unwrap();
        assert_eq!(
            r.distinct("server").unwrap(),
            ["fiber", "nginx", "lighttpd"]
        );
        assert_eq!(r.distinct("path").unwrap(), ["/echo", "/x.html"]);
        assert_eq!(
            r.values(&[("server", "fiber"), ("path", "/echo")], "rps")
                .unwrap(),
            [100.0, 120.0, 110.0]
        );
        assert_eq!(r.runs().unwrap(), 3);
        assert!(r.values(&[("server", "fiber")], "nope").is_err());
        let bad = Rows::parse("a,b\n1,2\n3\n").unwrap_err();
        assert!(bad.0.contains("line 3"), "{}", bad.0);
        assert!(Rows::parse("").is_err());
    }

    /// Every fixture replots: each chart a well-formed SVG and a PNG, with a legend entry for
    /// each series the CSVs name.
    #[test]
    fn every_experiment_replots_from_a_small_csv_with_a_legend_entry_per_series() {
        let expect: &[(&str, &[&str], &[&str])] = &[
            (
                "fibers",
                &["echo"],
                &[
                    "fiber",
                    "thread",
                    "nginx",
                    "the paper (figure 8): fiber = thread x 1.50 (+50%)",
                ],
            ),
            (
                "threads-cache",
                &["1k_bin"],
                &[
                    "process-cache-on",
                    "thread-cache-on",
                    "thread-cache-off",
                    "nginx",
                ],
            ),
            (
                "cgi",
                &["cgi"],
                &["fiber", "lighttpd", CGI_PARTS[0], CGI_PARTS[4]],
            ),
            (
                "specweb",
                &["response", "allocation"],
                &["fiber", "pipeline", "open KETA (paper)", "send threads"],
            ),
            (
                "h2",
                &["rps_c10", "cpu_c10", "p99_c10"],
                &["fiber", "thread"],
            ),
            (
                "tls",
                &[
                    "keepalive_cpu",
                    "handshake_cpu",
                    "handshakes",
                    "idle_memory",
                ],
                &["fiber", "nginx"],
            ),
            (
                "cluster",
                &["scaling", "throughput", "p99"],
                &[
                    "one instance",
                    "three instances",
                    "answered/s (client)",
                    "w3/s (HAProxy log)",
                ],
            ),
        ];
        for (name, stems, entries) in expect {
            let dir = fixture(name);
            let written = replot(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(written.len(), stems.len() * 2, "{name}: {written:?}");
            let mut all = String::new();
            for stem in *stems {
                let svg = fs::read_to_string(dir.join(format!("{stem}.svg")))
                    .unwrap_or_else(|e| panic!("{name} {stem}: {e}"));
                well_formed(&svg).unwrap_or_else(|e| panic!("{name} {stem}: {e}"));
                let png = fs::read(dir.join(format!("{stem}.png"))).unwrap();
                assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name} {stem}");
                all.push_str(&svg);
            }
            let texts = crate::plot::svg_texts(&all);
            for e in *entries {
                let text = e
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
                    .replace('\'', "&apos;");
                assert!(
                    texts.contains(&text),
                    "{name}: no legend entry {e:?} in {texts:?}"
                );
            }
            fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn the_fibers_chart_ticks_the_papers_claim_from_concurrency_5() {
        let dir = fixtures().join("fibers");
        let rows = Rows::parse(&fs::read_to_string(dir.join("rows.csv")).unwrap()).unwrap();
        let servers = rows.distinct("server").unwrap();
        let conns = rows.distinct("conns").unwrap();
        let c = fibers(&rows, &servers, "/echo", &conns, false, LABEL).unwrap();
        assert_eq!(c.stem, "echo");
        assert_eq!(c.figure.panels.len(), 2, "requests/s and CPU per request");
        let Kind::Grouped { series, ticks, .. } = &c.figure.panels[0].kind else {
            panic!("grouped bars")
        };
        assert_eq!(series[0].0, "fiber");
        // c=1 has no tick; c=10: thread's median (150, 155) x 1.5.
        assert_eq!(ticks.len(), 1);
        assert_eq!((ticks[0].group, ticks[0].series), (1, 0));
        assert!((ticks[0].y - 152.5 * 1.5).abs() < 1e-9);
        let v = series[0].1[0].unwrap();
        assert_eq!((v.mid, v.range), (105.0, Some((100.0, 110.0))));
        // Over the shaped link: a third panel (utilisation), its fiber ticks at half thread's.
        let shaped = fibers(&rows, &servers, "/echo", &conns, true, LABEL).unwrap();
        assert_eq!(shaped.figure.panels.len(), 3);
        let Kind::Grouped { ticks, .. } = &shaped.figure.panels[2].kind else {
            panic!("grouped bars")
        };
        assert!((ticks[0].y - 90.5 * 0.5).abs() < 1e-9);
    }

    #[test]
    fn the_cgi_chart_stacks_the_phases_up_to_the_clients_time() {
        let dir = fixtures().join("cgi");
        let rows = Rows::parse(&fs::read_to_string(dir.join("rows.csv")).unwrap()).unwrap();
        let servers = rows.distinct("server").unwrap();
        let c = cgi(&rows, &servers, LABEL).unwrap();
        assert_eq!(
            c.figure.panels.len(),
            3,
            "paper, weft's parts, every server"
        );
        let Kind::Stacked { bars, parts } = &c.figure.panels[1].kind else {
            panic!("stacked")
        };
        assert_eq!(bars, &["CGI", "in-process"]);
        // CGI: the medians, 2.85 ms in all, of which the server's phases 2.6835 ms.
        let sum: f64 = parts.iter().map(|(_, v)| v[0]).sum();
        assert!((sum - 2.85).abs() < 1e-9, "{sum}");
        assert!((parts[3].1[0] - 1.285).abs() < 1e-9);
        // The paper's bar: its 202 ms.
        let Kind::Stacked { parts, .. } = &c.figure.panels[0].kind else {
            panic!("stacked")
        };
        assert_eq!(parts.iter().map(|(_, v)| v[0]).sum::<f64>(), 202.0);
    }

    #[test]
    fn threads_cache_draws_the_caches_apart_from_the_papers_comparison() {
        let dir = fixtures().join("threads-cache");
        let rows = Rows::parse(&fs::read_to_string(dir.join("rows.csv")).unwrap()).unwrap();
        let servers = rows.distinct("server").unwrap();
        let c = threads_cache(&rows, &servers, "/files/1k.bin", LABEL).unwrap();
        let names = |p: &Panel| match &p.kind {
            Kind::Lines { series } => series.iter().map(|s| s.0.clone()).collect::<Vec<_>>(),
            _ => panic!("lines"),
        };
        assert_eq!(
            names(&c.figure.panels[0]),
            ["process-cache-on", "thread-cache-on", "nginx"]
        );
        assert_eq!(
            names(&c.figure.panels[1]),
            ["process-cache-on", "thread-cache-on", "thread-cache-off"]
        );
        let Kind::Lines { series } = &c.figure.panels[0].kind else {
            panic!("lines")
        };
        // x: the concurrency, sorted; y: the median of the runs.
        let xs: Vec<f64> = series[0].1.iter().map(|p| p.0).collect();
        assert_eq!(xs, [1.0, 12.0]);
        assert!((series[0].1[0].1.mid - 3.45).abs() < 1e-9);
    }

    #[test]
    fn a_quick_run_says_so_in_every_title_and_an_unknown_experiment_is_refused() {
        let dir = fixture("h2");
        let quick = charts_of("h2", &dir, true).unwrap();
        assert!(quick.iter().all(|c| c.figure.title.contains("smoke check")));
        assert!(charts_of("h2", &dir, false)
            .unwrap()
            .iter()
            .all(|c| !c.figure.title.contains("smoke check")));
        fs::write(dir.join("report.md"), "# nope: x\n").unwrap();
        let err = replot(&dir).unwrap_err().to_string();
        assert!(err.contains("\"nope\""), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_committed_results_replot_and_their_reports_show_every_chart() {
        let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results");
        for name in [
            "threads-cache",
            "fibers",
            "fibers-10mbit",
            "cgi",
            "specweb",
            "h2",
            "tls",
            "cluster",
        ] {
            let dir = results.join(name);
            let experiment = experiment_of(&dir).unwrap();
            assert_eq!(experiment, name.trim_end_matches("-10mbit"));
            let report = fs::read_to_string(dir.join("report.md")).unwrap();
            for c in charts_of(&experiment, &dir, false).unwrap() {
                assert!(
                    report.contains(&format!("({}.png)", c.stem)),
                    "{name}: the report does not show {}",
                    c.stem
                );
                assert!(
                    dir.join(format!("{}.svg", c.stem)).exists(),
                    "{name} {}",
                    c.stem
                );
            }
        }
    }
}
