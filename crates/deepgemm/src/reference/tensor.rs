//! Host tensors and where an operand lives: its rows, columns, layout and leading dimension.

use super::*;

/// Where the elements of an operand live: logical `rows x cols` (vectors are one row, scalars
/// 1x1), stored `row`- or `col`-major with leading dimension `ld` (in elements).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub rows: u64,
    pub cols: u64,
    pub layout: Layout,
    pub ld: u64,
}

impl Geometry {
    /// Element offset of (r, c).
    pub fn offset(&self, r: u64, c: u64) -> u64 {
        match self.layout {
            Layout::Row => r * self.ld + c,
            Layout::Col => c * self.ld + r,
        }
    }

    /// Contiguous elements per row (`row`) or column (`col`).
    pub fn inner(&self) -> u64 {
        match self.layout {
            Layout::Row => self.cols,
            Layout::Col => self.rows,
        }
    }

    /// Number of rows (`row`) or columns (`col`), each `ld` elements apart.
    pub fn outer(&self) -> u64 {
        match self.layout {
            Layout::Row => self.rows,
            Layout::Col => self.cols,
        }
    }

    /// Elements from the first to one past the last, padding between lines included.
    pub fn storage_elems(&self) -> u64 {
        if self.rows == 0 || self.cols == 0 {
            return 0;
        }
        (self.outer() - 1) * self.ld + self.inner()
    }
}

/// One operand on the host: encoded bytes in memory order, ready to upload.
#[derive(Debug, Clone)]
pub struct HostTensor {
    pub name: String,
    pub role: Role,
    pub dtype: DType,
    pub geometry: Geometry,
    /// `geometry.storage_elems() * dtype.size_bytes()` bytes. Padding between lines holds poison,
    /// so a kernel that reads it produces NaN.
    pub bytes: Vec<u8>,
}

impl HostTensor {
    /// Whether this is a matrix operand (A, B, C, D), whose leading dimension is a kernel argument.
    pub fn is_matrix(&self) -> bool {
        matches!(self.role, Role::A | Role::B | Role::C | Role::D)
    }

    pub(super) fn element(&self, r: u64, c: u64) -> f64 {
        let size = self.dtype.size_bytes() as usize;
        let at = self.geometry.offset(r, c) as usize * size;
        decode(self.dtype, &self.bytes[at..at + size])
    }
}

pub(super) fn extent(shape: Shape, sym: ShapeSym) -> u64 {
    match sym {
        ShapeSym::M => shape.m,
        ShapeSym::N => shape.n,
        ShapeSym::K => shape.k,
    }
}

pub(super) fn dim_value(shape: Shape, dim: &Dim) -> u64 {
    match dim {
        Dim::Sym(s) => extent(shape, *s),
        Dim::Lit(v) => *v,
        Dim::CeilDiv(s, b) => extent(shape, *s).div_ceil(*b),
    }
}

/// Where `operand` lives at `shape`: matrices in their declared layout with `ld_pad` extra
/// elements per leading dimension, vectors as one row, scalars as 1x1.
pub fn operand_geometry(
    operand: &crate::spec::Operand,
    shape: Shape,
    ld_pad: u64,
) -> Result<Geometry, ReferenceError> {
    // No allocation: the runtime calls this on every operand of every launch.
    let value = |d| dim_value(shape, d);
    let is_matrix = matches!(operand.role, Role::A | Role::B | Role::C | Role::D);
    let (rows, cols, layout) = match operand.dims.as_slice() {
        [] => (1, 1, Layout::Row),
        [len] => (1, value(len), Layout::Row),
        [rows, cols] => (value(rows), value(cols), operand.layout),
        dims => {
            return Err(ReferenceError::UnsupportedRank {
                operand: operand.name.clone(),
                dims: dims.len(),
            })
        }
    };
    let natural = match layout {
        Layout::Row => cols,
        Layout::Col => rows,
    };
    Ok(Geometry {
        rows,
        cols,
        layout,
        ld: natural + if is_matrix { ld_pad } else { 0 },
    })
}
