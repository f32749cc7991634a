//! The dispatch table: shape -> variant in O(1).
//!
//! A spec's buckets are the product of per-dimension ranges (`ShapeBucket::split`: a fixed
//! value, each value of a set, or a range cut at powers of two). The table keeps each
//! dimension's sorted ranges (an *axis*) and one cell per combination. A lookup finds each
//! extent's range through a 65-entry index by bit length (the ranges that can hold a value of
//! that many bits start there; a power-of-two cut leaves at most two of them) and reads the cell.

use deepgemm::plan::{Shape, ShapeBucket};
use serde::{Deserialize, Serialize};

/// The serialized table (part of the bundle header).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchTable {
    /// Sorted, disjoint, inclusive ranges of M, N and K.
    pub m: Vec<(u64, u64)>,
    pub n: Vec<(u64, u64)>,
    pub k: Vec<(u64, u64)>,
    /// `cells[(im * n.len() + in) * k.len() + ik]`: the variant's index, or null where no
    /// bucket covers that combination.
    pub cells: Vec<Option<u32>>,
}

impl DispatchTable {
    /// The table of `buckets` (variant `i` serves `buckets[i]`). Fails on overlapping buckets,
    /// which no spec produces.
    pub fn build(buckets: &[ShapeBucket]) -> Result<DispatchTable, String> {
        let axis = |pick: fn(&ShapeBucket) -> (u64, u64)| -> Result<Vec<(u64, u64)>, String> {
            let mut ranges: Vec<(u64, u64)> = buckets.iter().map(pick).collect();
            ranges.sort_unstable();
            ranges.dedup();
            for pair in ranges.windows(2) {
                if pair[0].1 >= pair[1].0 {
                    return Err(format!(
                        "bucket ranges {:?} and {:?} overlap",
                        pair[0], pair[1]
                    ));
                }
            }
            Ok(ranges)
        };
        let (m, n, k) = (axis(|b| b.m)?, axis(|b| b.n)?, axis(|b| b.k)?);
        let mut cells = vec![None; m.len() * n.len() * k.len()];
        for (variant, bucket) in buckets.iter().enumerate() {
            let position = |axis: &[(u64, u64)], range| {
                axis.iter()
                    .position(|r| *r == range)
                    .expect("the axis holds every range")
            };
            let cell = (position(&m, bucket.m) * n.len() + position(&n, bucket.n)) * k.len()
                + position(&k, bucket.k);
            if cells[cell].is_some() {
                return Err(format!("two variants serve the bucket {bucket:?}"));
            }
            cells[cell] = Some(variant as u32);
        }
        Ok(DispatchTable { m, n, k, cells })
    }
}

/// One dimension's ranges with the bit-length index.
#[derive(Debug, Clone)]
struct Axis {
    ranges: Vec<(u64, u64)>,
    /// `first[b]`: the first range whose upper bound has at least `b` bits (`ranges.len()` when
    /// none has).
    first: [u32; 65],
}

impl Axis {
    fn new(ranges: &[(u64, u64)]) -> Axis {
        let mut first = [ranges.len() as u32; 65];
        for (bits, slot) in first.iter_mut().enumerate() {
            if let Some(i) = ranges.iter().position(|r| bit_length(r.1) >= bits as u32) {
                *slot = i as u32;
            }
        }
        Axis {
            ranges: ranges.to_vec(),
            first,
        }
    }

    fn find(&self, value: u64) -> Option<usize> {
        let mut i = self.first[bit_length(value) as usize] as usize;
        while i < self.ranges.len() && self.ranges[i].1 < value {
            i += 1;
        }
        (i < self.ranges.len() && self.ranges[i].0 <= value).then_some(i)
    }
}

fn bit_length(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// The table ready for lookups.
#[derive(Debug, Clone)]
pub struct Dispatch {
    axes: [Axis; 3],
    cells: Vec<Option<u32>>,
}

impl Dispatch {
    pub fn new(table: &DispatchTable) -> Result<Dispatch, String> {
        let expected = table.m.len() * table.n.len() * table.k.len();
        if table.cells.len() != expected {
            return Err(format!(
                "the dispatch table has {} cells for {} x {} x {} ranges",
                table.cells.len(),
                table.m.len(),
                table.n.len(),
                table.k.len()
            ));
        }
        Ok(Dispatch {
            axes: [
                Axis::new(&table.m),
                Axis::new(&table.n),
                Axis::new(&table.k),
            ],
            cells: table.cells.clone(),
        })
    }

    /// The variant serving `shape`, `None` outside every bucket.
    pub fn lookup(&self, shape: Shape) -> Option<usize> {
        let [m, n, k] = &self.axes;
        let (im, in_, ik) = (m.find(shape.m)?, n.find(shape.n)?, k.find(shape.k)?);
        self.cells[(im * n.ranges.len() + in_) * k.ranges.len() + ik].map(|v| v as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deepgemm::spec::{DimDomain, ShapeSpec};

    fn buckets(m: DimDomain, n: DimDomain, k: DimDomain) -> Vec<ShapeBucket> {
        ShapeBucket::split(&ShapeSpec {
            m,
            n,
            k,
            fallback: deepgemm::spec::ShapeFallback::None,
        })
    }

    /// The O(1) lookup agrees with `ShapeBucket::contains` (the compiler's own rule) on every
    /// value near each bucket edge and on a sweep.
    #[test]
    fn lookup_agrees_with_the_buckets() {
        let all = buckets(
            DimDomain::Range { lo: 3, hi: 70_000 },
            DimDomain::Set(vec![1, 4096, 7168, 14336]),
            DimDomain::Fixed(512),
        );
        let dispatch = Dispatch::new(&DispatchTable::build(&all).unwrap()).unwrap();
        let mut ms: Vec<u64> = (0..=2000).collect();
        for b in &all {
            ms.extend([b.m.0 - 1, b.m.0, b.m.0 + 1, b.m.1 - 1, b.m.1, b.m.1 + 1]);
        }
        ms.extend([u64::MAX, 1 << 40]);
        for m in ms {
            for n in [0, 1, 2, 4095, 4096, 7168, 14336, 14337] {
                for k in [511, 512, 513] {
                    let shape = Shape::new(m, n, k);
                    let expected = all.iter().position(|b| b.contains(m, n, k));
                    assert_eq!(dispatch.lookup(shape), expected, "{shape}");
                }
            }
        }
    }

    #[test]
    fn a_range_up_to_u64_max_has_a_bucket_per_bit() {
        let all = buckets(
            DimDomain::Range {
                lo: 1,
                hi: u64::MAX,
            },
            DimDomain::Fixed(8),
            DimDomain::Fixed(8),
        );
        let dispatch = Dispatch::new(&DispatchTable::build(&all).unwrap()).unwrap();
        for m in [1, 16, 17, 1 << 33, (1 << 33) + 1, u64::MAX] {
            let expected = all.iter().position(|b| b.contains(m, 8, 8));
            assert!(expected.is_some());
            assert_eq!(dispatch.lookup(Shape::new(m, 8, 8)), expected, "m = {m}");
        }
    }

    #[test]
    fn overlapping_buckets_are_refused() {
        let a = ShapeBucket {
            m: (1, 16),
            n: (1, 1),
            k: (1, 1),
        };
        let b = ShapeBucket {
            m: (8, 32),
            n: (1, 1),
            k: (1, 1),
        };
        let err = DispatchTable::build(&[a, b]).unwrap_err();
        assert!(err.contains("overlap"), "{err}");
        assert!(DispatchTable::build(&[a, a])
            .unwrap_err()
            .contains("two variants"));
    }

    #[test]
    fn a_table_of_the_wrong_size_is_an_error() {
        let mut table = DispatchTable::build(&buckets(
            DimDomain::Fixed(1),
            DimDomain::Fixed(1),
            DimDomain::Fixed(1),
        ))
        .unwrap();
        table.cells.push(None);
        assert!(Dispatch::new(&table).unwrap_err().contains("2 cells"));
    }
}
