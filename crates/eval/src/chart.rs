//! The accuracy-vs-context-length chart (the paper's figure 1, for the user's model):
//! one line per suite and arm, each point with its 95 % Wilson interval as an error
//! bar, lengths on a logarithmic axis, drawn with `plotters` as SVG (no system
//! libraries or fonts needed to write it).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::error::EvalError;
use crate::report::SummaryRow;
use crate::suite::{format_length, Suite};

/// Writes the chart of `rows` to `path` (SVG): the accuracy of each row (items scored
/// 1, see [`SummaryRow`]) with its 95 % Wilson interval as an error bar; `window`, the
/// baseline's window in characters, is marked with a vertical line. A suite keeps its
/// colour in every arm: a thick line for the RLM, a thin one for the baseline, a
/// medium one for external arms; each arm's points are shifted a little sideways so
/// that the bars of one length do not hide each other.
pub fn write_chart(
    path: &Path,
    rows: &[SummaryRow],
    title: &str,
    window: Option<u64>,
) -> Result<(), EvalError> {
    let failed = |e: &dyn std::fmt::Display| EvalError::Chart {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let mut arms: Vec<&str> = rows.iter().map(|r| r.arm.as_str()).collect();
    arms.sort_by_key(|arm| (*arm != "rlm", *arm != "baseline", *arm));
    arms.dedup();
    // Points of arm i are at length × SHIFT^(i - middle): a few percent on a log axis.
    const SHIFT: f64 = 1.06;
    let middle = (arms.len() as f64 - 1.0) / 2.0;
    let mut series: BTreeMap<(Suite, String), Vec<Point>> = BTreeMap::new();
    for row in rows {
        let offset = arms.iter().position(|a| *a == row.arm).unwrap_or(0) as f64 - middle;
        series
            .entry((row.suite, row.arm.clone()))
            .or_default()
            .push((
                row.length as f64 * SHIFT.powf(offset),
                row.accuracy * 100.0,
                row.ci_low * 100.0,
                row.ci_high * 100.0,
            ));
    }
    let lengths: Vec<f64> = rows.iter().map(|r| r.length as f64).collect();
    let min = lengths
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .max(1.0);
    let max = lengths.iter().copied().fold(0.0, f64::max).max(min * 2.0);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d((min / 1.5..max * 1.5).log_scale(), 0.0..105.0)
        .map_err(|e| failed(&e))?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_labels(8)
        .y_labels(6)
        .x_desc("context length (characters)")
        .y_desc("accuracy (%), bars: 95 % Wilson interval")
        .x_label_formatter(&|x| short_length(*x))
        .draw()
        .map_err(|e| failed(&e))?;
    if let Some(window) = window.filter(|w| (*w as f64) > min / 1.5 && (*w as f64) < max * 1.5) {
        let x = window as f64;
        chart
            .draw_series(LineSeries::new(
                [(x, 0.0), (x, 105.0)],
                ShapeStyle::from(&BLACK.mix(0.35)).stroke_width(1),
            ))
            .map_err(|e| failed(&e))?
            .label(format!("baseline window ({})", format_length(window)))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.35)));
    }
    for ((suite, arm), mut points) in series {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let index = Suite::ALL.iter().position(|s| *s == suite).unwrap_or(0);
        let color = Palette99::pick(index).to_rgba();
        let width = match arm.as_str() {
            "rlm" => 3,
            "baseline" => 1,
            _ => 2,
        };
        let style = ShapeStyle::from(&color).stroke_width(width);
        chart
            .draw_series(LineSeries::new(points.iter().map(|p| (p.0, p.1)), style))
            .map_err(|e| failed(&e))?
            .label(format!("{suite} · {arm}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        chart
            .draw_series(
                points
                    .iter()
                    .map(|p| ErrorBar::new_vertical(p.0, p.2, p.1, p.3, color.mix(0.6), 6)),
            )
            .map_err(|e| failed(&e))?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|p| Circle::new((p.0, p.1), 4, color.filled())),
            )
            .map_err(|e| failed(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| failed(&e))?;
    root.present().map_err(|e| failed(&e))?;
    Ok(())
}

/// One point of a line: x (the length, shifted by arm), accuracy, interval low, high.
type Point = (f64, f64, f64, f64);

/// A length on the axis, in decimal units (the ticks of a log axis are powers of 10):
/// `10K`, `1M`, `1.5M`.
fn short_length(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.1}M", x / 1e6).replace(".0M", "M")
    } else if x >= 1e3 {
        format!("{:.0}K", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_is_an_svg_with_a_line_per_suite_and_arm() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("accuracy.svg");
        let row = |arm: &str, length: u64, score: f64| SummaryRow {
            suite: Suite::Sniah,
            length,
            arm: arm.into(),
            items: 3,
            correct: (score * 3.0) as usize,
            accuracy: score,
            ci_low: (score - 0.3).max(0.0),
            ci_high: (score + 0.3).min(1.0),
            score,
            mean_input_tokens: Some(10.0),
            mean_output_tokens: None,
            tokens_reported: 3,
            tokens_per_correct: None,
            seconds_per_correct: None,
            cost_usd: None,
            mean_seconds: 1.0,
            forced: 0,
            failed: 0,
        };
        let rows = [
            row("rlm", 8192, 1.0),
            row("rlm", 1 << 20, 1.0),
            row("baseline", 8192, 1.0),
            row("baseline", 1 << 20, 0.33),
        ];
        write_chart(&path, &rows, "test", Some(96 << 10)).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        assert!(svg.contains("sniah · rlm") && svg.contains("sniah · baseline"));
        assert!(svg.contains("context length"), "axis labels");
        assert!(svg.contains("Wilson interval"), "the bars are named");
        assert!(
            svg.contains("baseline window (96k)"),
            "the window is marked"
        );
    }
}
