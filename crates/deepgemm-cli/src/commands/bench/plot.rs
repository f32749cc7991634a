//! `--plot out.svg`: bars per shape (ours vs cuBLAS) above a roofline plot of the same shapes.

use super::BenchRow;
use plotters::prelude::*;
use std::path::Path;

const OURS: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const CUBLAS: RGBColor = RGBColor(0x7f, 0x7f, 0x7f);

/// Write the two-panel SVG chart for one suite's rows.
pub fn write_svg(
    path: &Path,
    title: &str,
    rows: &[BenchRow],
    peak_tflops: f64,
    dram_tbps: f64,
) -> Result<(), String> {
    let measured: Vec<&BenchRow> = rows.iter().filter(|r| r.ours_tflops.is_some()).collect();
    if measured.is_empty() {
        return Err("nothing to plot: no shape was measured".into());
    }
    let width = (160 + 60 * measured.len() as u32).max(800);
    let root = SVGBackend::new(path, (width, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (top, bottom) = root.split_vertically(450);
    draw_bars(&top, title, &measured).map_err(|e| e.to_string())?;
    draw_roofline(&bottom, &measured, peak_tflops, dram_tbps).map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Which measurement of a row a bar series shows.
type RowValue = fn(&BenchRow) -> Option<f64>;

fn draw_bars(
    area: &Area<'_>,
    title: &str,
    rows: &[&BenchRow],
) -> Result<(), Box<dyn std::error::Error>> {
    let top = rows
        .iter()
        .flat_map(|r| [r.ours_tflops, r.cublas_tflops])
        .flatten()
        .fold(1.0, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{title}: TFLOP/s per shape"), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(70)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..rows.len() as f64, 0f64..top)?;
    let labels: Vec<String> = rows.iter().map(|r| r.shape.to_string()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(rows.len())
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            labels.get(i).cloned().unwrap_or_default()
        })
        .y_desc("TFLOP/s")
        .draw()?;
    let bar = |i: usize, offset: f64, value: f64, color: RGBColor| {
        let x0 = i as f64 + offset;
        Rectangle::new([(x0, 0.0), (x0 + 0.38, value)], color.filled())
    };
    let series: [(&str, f64, RGBColor, RowValue); 2] = [
        ("DeepGEMM", 0.1, OURS, |r| r.ours_tflops),
        ("cuBLASLt", 0.5, CUBLAS, |r| r.cublas_tflops),
    ];
    for (label, offset, color, value) in series {
        chart
            .draw_series(
                rows.iter()
                    .enumerate()
                    .filter_map(|(i, r)| value(r).map(|v| bar(i, offset, v, color))),
            )?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn draw_roofline(
    area: &Area<'_>,
    rows: &[&BenchRow],
    peak_tflops: f64,
    dram_tbps: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let intensities: Vec<f64> = rows.iter().map(|r| r.intensity).collect();
    let lo = intensities
        .iter()
        .copied()
        .fold(f64::MAX, f64::min)
        .max(0.1)
        / 2.0;
    let hi = intensities.iter().copied().fold(0.0, f64::max) * 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Roofline (FLOP per DRAM byte, each operand moved once)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (lo..hi).log_scale(),
            (0.1f64..peak_tflops * 1.3).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOP/byte)")
        .y_desc("TFLOP/s")
        .draw()?;
    let roof = |x: f64| (x * dram_tbps).min(peak_tflops);
    let steps = 200;
    chart
        .draw_series(LineSeries::new(
            (0..=steps).map(|i| {
                let x = lo * (hi / lo).powf(i as f64 / steps as f64);
                (x, roof(x))
            }),
            BLACK.stroke_width(2),
        ))?
        .label("roof")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], BLACK));
    chart
        .draw_series(rows.iter().filter_map(|r| {
            r.ours_tflops
                .map(|v| Circle::new((r.intensity, v), 4, OURS.filled()))
        }))?
        .label("DeepGEMM")
        .legend(|(x, y)| Circle::new((x + 5, y), 4, OURS.filled()));
    chart
        .draw_series(rows.iter().filter_map(|r| {
            r.cublas_tflops
                .map(|v| TriangleMarker::new((r.intensity, v), 5, CUBLAS.filled()))
        }))?
        .label("cuBLASLt")
        .legend(|(x, y)| TriangleMarker::new((x + 5, y), 5, CUBLAS.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
