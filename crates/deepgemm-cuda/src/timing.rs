//! Timing by the rules of docs/cli.md ("Measuring"): CUDA events around each run, warm-up first,
//! the L2 flushed (a 256 MiB buffer written) before every timed run, the median of at least 50
//! runs.

use crate::device::{DeviceBuffer, Gpu};
use crate::error::{driver, CudaError};
use cudarc::driver::{result, sys};

/// Bytes written between runs to evict the L2 (the H200's is 60 MB).
pub const L2_FLUSH_BYTES: usize = 256 << 20;
/// The fewest timed runs whose median counts as a figure.
pub const MIN_RUNS: u32 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimingOptions {
    pub warmup: u32,
    /// Timed runs; raised to [`MIN_RUNS`].
    pub runs: u32,
    pub flush_l2: bool,
}

impl Default for TimingOptions {
    fn default() -> Self {
        TimingOptions {
            warmup: 5,
            runs: MIN_RUNS,
            flush_l2: true,
        }
    }
}

/// Times of the timed runs, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Timing {
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub runs: u32,
}

/// A CUDA event, destroyed on drop.
struct Event(sys::CUevent);

impl Event {
    fn new() -> Result<Event, CudaError> {
        result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map(Event)
            .map_err(driver("cuEventCreate"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate, destroyed only here.
        let _ = unsafe { result::event::destroy(self.0) };
    }
}

/// Holds the L2 flush buffer so it is allocated once per process, not per measurement.
pub struct Timer {
    flush: DeviceBuffer,
}

impl Timer {
    pub fn new(gpu: &Gpu) -> Result<Timer, CudaError> {
        Ok(Timer {
            flush: gpu.alloc(L2_FLUSH_BYTES)?,
        })
    }

    /// Runs `enqueue` (which must only enqueue work on the GPU's stream) `warmup` times, then
    /// times `runs` runs, each between two events, with the L2 flushed before each.
    pub fn time(
        &self,
        gpu: &Gpu,
        options: TimingOptions,
        mut enqueue: impl FnMut() -> Result<(), CudaError>,
    ) -> Result<Timing, CudaError> {
        for _ in 0..options.warmup {
            enqueue()?;
        }
        let runs = options.runs.max(MIN_RUNS);
        gpu.bind()?;
        let events: Vec<(Event, Event)> = (0..runs)
            .map(|_| Ok((Event::new()?, Event::new()?)))
            .collect::<Result<_, CudaError>>()?;
        for (start, stop) in &events {
            if options.flush_l2 {
                gpu.memset(self.flush.ptr(), 0, self.flush.len())?;
            }
            // SAFETY: live events recorded on this context's stream.
            unsafe { result::event::record(start.0, gpu.stream()) }
                .map_err(driver("cuEventRecord"))?;
            enqueue()?;
            // SAFETY: as above.
            unsafe { result::event::record(stop.0, gpu.stream()) }
                .map_err(driver("cuEventRecord"))?;
        }
        gpu.synchronize()?;
        let mut times = events
            .iter()
            .map(|(start, stop)| {
                // SAFETY: both events were recorded and the stream is idle.
                unsafe { result::event::elapsed(start.0, stop.0) }
                    .map(|ms| ms as f64 * 1000.0)
                    .map_err(driver("cuEventElapsedTime"))
            })
            .collect::<Result<Vec<f64>, CudaError>>()?;
        Ok(summarize(&mut times))
    }
}

fn summarize(times: &mut [f64]) -> Timing {
    times.sort_by(f64::total_cmp);
    let n = times.len();
    let median = if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2.0
    };
    Timing {
        median_us: median,
        min_us: times[0],
        max_us: times[n - 1],
        runs: n as u32,
    }
}

/// TFLOP/s of a GEMM of `shape` that took `us` microseconds: 2·M·N·K / t.
pub fn tflops(shape: deepgemm::plan::Shape, us: f64) -> f64 {
    shape.flops() / (us * 1e-6) / 1e12
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let t = summarize(&mut [5.0, 1.0, 3.0]);
        assert_eq!(
            (t.median_us, t.min_us, t.max_us, t.runs),
            (3.0, 1.0, 5.0, 3)
        );
        let t = summarize(&mut [4.0, 1.0, 3.0, 2.0]);
        assert_eq!(t.median_us, 2.5);
    }

    #[test]
    fn tflops_of_a_known_gemm() {
        // 2 * 4096^3 flops in 200 us = 687.2 TFLOP/s.
        let t = tflops(deepgemm::plan::Shape::new(4096, 4096, 4096), 200.0);
        assert!((t - 687.19).abs() < 0.01, "{t}");
    }
}
