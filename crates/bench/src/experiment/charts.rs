//! The charts of the `threads-cache`, `fibers`, `cgi`, `specweb` and `h2` experiments, drawn from
//! their `rows.csv` (every run of every point): by the experiment when it has run, and again
//! by `weft-bench replot DIR` for results written before the charts had whiskers, so a chart
//! and the rows beside it always agree.

use std::fs;
use std::path::{Path, PathBuf};

use super::{median, written_by_quick_run};
use crate::plot;
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

    /// Column `value` of every row whose columns `keys` hold the given cells (one value a
    /// run); a cell that is not a number is left out.
    pub fn values(&self, keys: &[(&str, &str)], value: &str) -> Result<Vec<f64>, BadInput> {
        let v = self.col(value)?;
        let keys = keys
            .iter()
            .map(|&(k, want)| Ok((self.col(k)?, want)))
            .collect::<Result<Vec<_>, BadInput>>()?;
        Ok(self
            .rows
            .iter()
            .filter(|r| keys.iter().all(|&(k, want)| r[k] == want))
            .filter_map(|r| r[v].parse::<f64>().ok())
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
    pub title: String,
    pub unit: &'static str,
    pub bars: Vec<plot::Bar>,
}

/// A bar for `label` over the runs' values: the median, and a whisker from the smallest to
/// the largest run when there are several.
pub fn bar(label: String, runs: &[f64]) -> plot::Bar {
    let runs: Vec<f64> = runs.iter().copied().filter(|x| x.is_finite()).collect();
    let range = (runs.len() > 1).then(|| {
        let lo = runs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    });
    plot::Bar {
        label,
        value: median(&runs),
        range,
    }
}

/// threads-cache: a chart per file, a bar per server (mean completion time).
pub fn threads_cache(rows: &Rows, servers: &[String], file: &str) -> Result<Chart, BadInput> {
    let bars = servers
        .iter()
        .map(|s| {
            Ok(bar(
                s.clone(),
                &rows.values(&[("server", s), ("file", file)], "avg_ms")?,
            ))
        })
        .collect::<Result<_, BadInput>>()?;
    Ok(Chart {
        stem: file.trim_start_matches("/files/").replace('.', "_"),
        title: format!("groups, {file}: mean completion time"),
        unit: "ms",
        bars,
    })
}

/// fibers: a chart per path, a bar per server and concurrency (requests/s); a server without
/// the path (no rows) has no bars.
pub fn fibers(
    rows: &Rows,
    servers: &[String],
    path: &str,
    conns: &[String],
) -> Result<Chart, BadInput> {
    let mut bars = Vec::new();
    for s in servers {
        for c in conns {
            let runs = rows.values(&[("server", s), ("path", path), ("conns", c)], "rps")?;
            if !runs.is_empty() {
                bars.push(bar(format!("{s} c={c}"), &runs));
            }
        }
    }
    Ok(Chart {
        stem: path.trim_start_matches('/').replace('.', "_"),
        title: format!("{path}: requests/s"),
        unit: "req/s",
        bars,
    })
}

/// cgi: one chart, a bar per server and path (mean time per request), in `keys`' order.
pub fn cgi(rows: &Rows, keys: &[(String, String)]) -> Result<Chart, BadInput> {
    let bars = keys
        .iter()
        .map(|(s, p)| {
            let runs = rows.values(&[("server", s), ("path", p)], "mean_ms")?;
            Ok(bar(format!("{s} {p}"), &runs))
        })
        .collect::<Result<_, BadInput>>()?;
    Ok(Chart {
        stem: "cgi".into(),
        title: "the CGI paper's POST: mean time".into(),
        unit: "ms",
        bars,
    })
}

/// cgi's (server, path) pairs that have rows, sorted as its report lists them.
pub fn cgi_keys(rows: &Rows) -> Result<Vec<(String, String)>, BadInput> {
    let (s, p) = (rows.col("server")?, rows.col("path")?);
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in &rows.rows {
        let k = (r[s].clone(), r[p].clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.sort();
    Ok(keys)
}

/// specweb: one chart, a bar per server and client count (mean response time).
pub fn specweb(rows: &Rows, servers: &[String], clients: &[String]) -> Result<Chart, BadInput> {
    let mut bars = Vec::new();
    for s in servers {
        for c in clients {
            let runs = rows.values(&[("server", s), ("clients", c)], "mean_response_ms")?;
            bars.push(bar(format!("{s} c={c}"), &runs));
        }
    }
    Ok(Chart {
        stem: "response".into(),
        title: "SPECweb99-like: mean response time".into(),
        unit: "ms",
        bars,
    })
}

/// h2's measures drawn, by their `rows.csv` column: a chart of each per connection count.
pub const H2_MEASURES: [&str; 3] = ["rps", "cpu_us_per_req", "p99_ms"];

/// h2: for `conns` connections, a bar per server and streams per connection of `measure`
/// (one of [`H2_MEASURES`]).
pub fn h2(
    rows: &Rows,
    servers: &[String],
    conns: &str,
    streams: &[String],
    measure: &str,
) -> Result<Chart, BadInput> {
    let (stem, what, unit) = match measure {
        "rps" => ("rps", "requests/s", "req/s"),
        "cpu_us_per_req" => ("cpu", "server CPU per request", "us"),
        "p99_ms" => ("p99", "p99 latency", "ms"),
        other => return Err(BadInput(format!("h2: no chart of {other:?}"))),
    };
    let mut bars = Vec::new();
    for s in servers {
        for m in streams {
            let runs = rows.values(&[("server", s), ("conns", conns), ("streams", m)], measure)?;
            if !runs.is_empty() {
                bars.push(bar(format!("{s} m={m}"), &runs));
            }
        }
    }
    Ok(Chart {
        stem: format!("{stem}_c{conns}"),
        title: format!("HTTP/2, {conns} connections x m streams: {what}"),
        unit,
        bars,
    })
}

/// Writes `DIR/STEM.svg` and `DIR/STEM.png` for `chart`; returns the report's line for them.
/// A quick run's charts say so in their title, since they travel without the report.
pub fn draw(dir: &Path, quick: bool, runs: usize, chart: &Chart) -> std::io::Result<String> {
    let title = if quick {
        format!(
            "{} (quick run: a smoke check, not a measurement)",
            chart.title
        )
    } else {
        chart.title.clone()
    };
    let legend = if runs > 1 {
        format!("bars: median of {runs} runs; whiskers: smallest to largest run")
    } else {
        "one run".to_string()
    };
    let stem = &chart.stem;
    fs::write(
        dir.join(format!("{stem}.svg")),
        plot::bar_chart(&title, chart.unit, &chart.bars, &legend),
    )?;
    fs::write(
        dir.join(format!("{stem}.png")),
        plot::bar_chart_png(&title, chart.unit, &chart.bars, &legend),
    )?;
    Ok(format!("![{title}]({stem}.png) ([SVG]({stem}.svg))\n"))
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

/// The charts of experiment `name` drawn from `rows` (its servers, files, paths and client
/// counts in the order they first appear), or `None` for an experiment drawn otherwise.
fn charts_of(name: &str, rows: &Rows) -> Result<Option<Vec<Chart>>, BadInput> {
    let servers = rows.distinct("server")?;
    Ok(Some(match name {
        "threads-cache" => rows
            .distinct("file")?
            .iter()
            .map(|f| threads_cache(rows, &servers, f))
            .collect::<Result<Vec<_>, _>>()?,
        "fibers" => {
            let conns = rows.distinct("conns")?;
            rows.distinct("path")?
                .iter()
                .map(|p| fibers(rows, &servers, p, &conns))
                .collect::<Result<Vec<_>, _>>()?
        }
        "cgi" => vec![cgi(rows, &cgi_keys(rows)?)?],
        "specweb" => vec![specweb(rows, &servers, &rows.distinct("clients")?)?],
        "h2" => {
            let streams = rows.distinct("streams")?;
            let mut v = Vec::new();
            for c in rows.distinct("conns")? {
                for m in H2_MEASURES {
                    v.push(h2(rows, &servers, &c, &streams, m)?);
                }
            }
            v
        }
        _ => return Ok(None),
    }))
}

/// `weft-bench replot DIR`: draws the charts of the experiment whose results are in `dir`
/// again from its `rows.csv`, under the same file names (the report's links stay right).
/// Returns the files written.
pub fn replot(dir: &Path) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    let name = experiment_of(dir)?;
    let csv = dir.join("rows.csv");
    let text = fs::read_to_string(&csv).map_err(|e| BadInput(format!("{}: {e}", csv.display())))?;
    let rows = Rows::parse(&text).map_err(|e| BadInput(format!("{}: {}", csv.display(), e.0)))?;
    let Some(charts) = charts_of(&name, &rows)? else {
        return Err(BadInput(format!(
            "{}: experiment {name:?}: replot draws threads-cache, fibers, cgi, specweb and \
             h2 (tls and cluster draw their charts when they run)",
            dir.display()
        ))
        .into());
    };
    let quick = written_by_quick_run(dir) == Some(true);
    let runs = rows.runs()?;
    let mut written = Vec::new();
    for c in &charts {
        draw(dir, quick, runs, c)?;
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

    #[test]
    fn a_fibers_chart_has_a_whiskered_bar_per_server_that_ran_the_path() {
        let r = Rows::parse(FIBERS).unwrap();
        let servers = r.distinct("server").unwrap();
        let c = fibers(&r, &servers, "/echo", &["1".into()]).unwrap();
        assert_eq!((c.stem.as_str(), c.unit), ("echo", "req/s"));
        let labels: Vec<&str> = c.bars.iter().map(|b| b.label.as_str()).collect();
        assert_eq!(labels, ["fiber c=1", "nginx c=1"]);
        assert_eq!(
            (c.bars[0].value, c.bars[0].range),
            (110.0, Some((100.0, 120.0)))
        );
        assert_eq!(
            (c.bars[1].value, c.bars[1].range),
            (85.0, Some((80.0, 90.0)))
        );
        let page = fibers(&r, &servers, "/x.html", &["1".into()]).unwrap();
        assert_eq!(page.stem, "x_html");
        assert_eq!(page.bars.len(), 2);
        assert_eq!(page.bars[1].range, None, "one run: no whisker");
    }

    #[test]
    fn an_h2_chart_per_connection_count_and_measure() {
        let rows = Rows::parse(
            "server,over,conns,streams,run,rps,cpu_us_per_req,p99_ms\n\
             fiber,tls,10,1,1,100,2.0,0.5\n\
             fiber,tls,10,1,2,120,2.5,0.7\n\
             thread,tls,10,1,1,90,3.0,0.6\n\
             fiber,tls,10,10,1,300,1.0,1.5\n\
             fiber,tls,1000,1,1,80,4.0,9.0\n",
        )
        .unwrap();
        let servers = rows.distinct("server").unwrap();
        let streams = rows.distinct("streams").unwrap();
        let c = h2(&rows, &servers, "10", &streams, "rps").unwrap();
        assert_eq!((c.stem.as_str(), c.unit), ("rps_c10", "req/s"));
        let labels: Vec<&str> = c.bars.iter().map(|b| b.label.as_str()).collect();
        // No thread run at m=10: no bar for it.
        assert_eq!(labels, ["fiber m=1", "fiber m=10", "thread m=1"]);
        assert_eq!(
            (c.bars[0].value, c.bars[0].range),
            (110.0, Some((100.0, 120.0)))
        );
        let cpu = h2(&rows, &servers, "1000", &streams, "cpu_us_per_req").unwrap();
        assert_eq!(
            (cpu.stem.as_str(), cpu.unit, cpu.bars.len()),
            ("cpu_c1000", "us", 1)
        );
        assert_eq!(
            h2(&rows, &servers, "10", &streams, "p99_ms").unwrap().stem,
            "p99_c10"
        );
        assert!(h2(&rows, &servers, "10", &streams, "rows").is_err());
        // replot draws three charts per connection count.
        assert_eq!(charts_of("h2", &rows).unwrap().unwrap().len(), 6);
    }

    #[test]
    fn a_bar_is_the_median_with_the_runs_range() {
        let b = bar("x".into(), &[3.0, 1.0, f64::NAN, 2.0, 10.0]);
        assert_eq!((b.value, b.range), (2.5, Some((1.0, 10.0))));
        let one = bar("y".into(), &[4.0]);
        assert_eq!((one.value, one.range), (4.0, None));
        assert!(bar("z".into(), &[]).value.is_nan());
    }

    #[test]
    fn replot_redraws_a_results_folder_under_the_same_names() {
        let dir = std::env::temp_dir().join(format!("weft-bench-replot-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("rows.csv"), FIBERS).unwrap();
        fs::write(
            dir.join("report.md"),
            "# fibers: requests/s\n\n![](echo.png)\n",
        )
        .unwrap();
        let written = replot(&dir).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["echo.svg", "echo.png", "x_html.svg", "x_html.png"]);
        let svg = fs::read_to_string(dir.join("echo.svg")).unwrap();
        assert!(svg.contains("median of 3 runs"), "{svg}");
        assert!(
            !svg.contains("smoke check"),
            "no marker: a full run's folder"
        );
        assert!(fs::read(dir.join("echo.png"))
            .unwrap()
            .starts_with(b"\x89PNG"));
        // An experiment it does not draw is refused by name.
        fs::write(dir.join("report.md"), "# tls: HTTPS\n").unwrap();
        let err = replot(&dir).unwrap_err().to_string();
        assert!(err.contains("\"tls\""), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_committed_results_replot_with_every_run_behind_each_bar() {
        let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results");
        for name in ["threads-cache", "fibers", "fibers-10mbit", "cgi", "specweb"] {
            let dir = results.join(name);
            let text = fs::read_to_string(dir.join("rows.csv")).unwrap();
            let rows = Rows::parse(&text).unwrap();
            let experiment = experiment_of(&dir).unwrap();
            assert_eq!(experiment, name.trim_end_matches("-10mbit"));
            assert!(rows.runs().unwrap() >= 5, "{name}: full runs");
            // Every chart replot draws is one the report links to, with every run behind each
            // bar (5 runs: a whisker).
            let report = fs::read_to_string(dir.join("report.md")).unwrap();
            for c in charts_of(&experiment, &rows).unwrap().unwrap() {
                assert!(
                    report.contains(&format!("({}.png)", c.stem)),
                    "{name}: {}",
                    c.stem
                );
                for b in &c.bars {
                    assert!(b.range.is_some(), "{name} {}: {}", c.stem, b.label);
                }
            }
        }
    }
}
