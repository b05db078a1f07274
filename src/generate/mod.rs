//! R-MAT graphs with PaRMAT's options (directed or undirected, no duplicate edges, no self
//! loops, sorted output), reproducible from a seed.
//!
//! # The model
//!
//! Each edge is drawn by descending `scale` levels of the adjacency matrix; at every level one
//! quadrant is chosen, top-left with probability `a`, top-right `b`, bottom-left `c` and
//! bottom-right `d = 1 - a - b - c`, and it fixes the next bit of the source (row) and target
//! (column) ids. The defaults are the Graph500 parameters `a = 0.57, b = c = 0.19` that the
//! gMAGNUS paper generated its matrices with (through PaRMAT); PaRMAT's own defaults are
//! `a = 0.45, b = c = 0.22`.
//!
//! # The stream
//!
//! Draws form a stream: position `i` is a pure function of `(seed, i)` (blocks of 2^16
//! positions, each a wyrand generator seeded by splitmix64 from the seed and the block index), so
//! the output is byte-identical whatever the thread count. Levels are drawn five at a time from
//! an alias table over the 4^5 quadrant sequences, each probability exact to 2^-32 (the same
//! resolution as a 32-bit threshold per level), one 32-bit random per lookup. A draw is
//! rejected, its position consumed, when an id is `>= n` (vertex counts that are not powers of
//! two are drawn on the next power of two) or when it is a self loop and those are off.
//! Undirected draws are folded to `(min, max)`. With `no_duplicates` the result is exactly the
//! first `M` distinct edges of the stream in the order they first occur (undirected edges judged
//! as unordered pairs), so asking for fewer edges gives a prefix of the same list; the first
//! round draws as many candidates as an exact model of R-MAT's collisions says will be enough,
//! so a second round is rare. A weight is a function of the seed and the position where its edge
//! was drawn, so turning weights on changes no edge.
//!
//! # Differences from PaRMAT
//!
//! - PaRMAT splits the matrix into squares with slightly perturbed probabilities (up to 1%
//!   noise) and inside each square draws the row and the column bits independently; here every
//!   level of every edge is a true quadrant choice with the exact probabilities, as in Graph500.
//! - PaRMAT labels its quadrants with the source along the matrix's horizontal axis, so its `b`
//!   is the quadrant called `c` here (source in the high half, target in the low half). The two
//!   agree whenever `b == c`, as with both sets of defaults.
//! - PaRMAT divides ranges that are not powers of two by halving in floating point; here ids
//!   `>= n` are redrawn. PaRMAT's undirected mode redraws edges below the diagonal of diagonal
//!   squares; here they are folded. PaRMAT seeds from the clock and writes tab-separated pairs;
//!   here the seed is a parameter and `.el` files separate ids with one space.

pub mod rng;
mod select;
mod sort;
mod stream;
#[cfg(test)]
mod tests;
mod write;

pub use write::{check_output, stage_edges_as, write_edges, write_edges_as, Symmetry};

use crate::edges::EdgeList;
use crate::error::{Error, Result};

/// Graph500's probability of the top-left quadrant (also the gMAGNUS paper's).
pub const DEFAULT_A: f64 = 0.57;
/// Graph500's probability of the top-right quadrant.
pub const DEFAULT_B: f64 = 0.19;
/// Graph500's probability of the bottom-left quadrant.
pub const DEFAULT_C: f64 = 0.19;
/// The seed used when none is given.
pub const DEFAULT_SEED: u64 = 1;

/// The most vertices a graph may have: gmcl's readers take ids up to 4294967294 (`u32::MAX` is
/// kept free), so a generated file always reads back.
pub const MAX_VERTICES: u64 = u32::MAX as u64;

/// What to generate. [`RmatParams::new`] gives the defaults; set fields to change them.
#[derive(Clone, Debug, PartialEq)]
pub struct RmatParams {
    /// log2 of the vertex count, used when `vertices` is `None`; at most 32.
    pub scale_log2: u32,
    /// Any vertex count from 1 to 2^32; ids are drawn on the next power of two and those
    /// `>= vertices` are redrawn.
    pub vertices: Option<u64>,
    /// Number of edges `M`.
    pub edges: u64,
    /// Probability of the top-left quadrant (both ids stay in the low half).
    pub a: f64,
    /// Probability of the top-right quadrant (source low, target high).
    pub b: f64,
    /// Probability of the bottom-left quadrant (source high, target low); `d = 1 - a - b - c`.
    pub c: f64,
    /// Exactly `M` distinct edges: the first `M` distinct edges of the stream.
    pub no_duplicates: bool,
    /// No edge `(u, u)`.
    pub no_self_loops: bool,
    /// Each edge is written once as `(min, max)`; duplicates are judged on the unordered pair.
    pub undirected: bool,
    /// Output sorted by `(source, target)` instead of in stream order.
    pub sorted: bool,
    /// A weight per edge, uniform in `[0.5, 1.5)` (one of 2^23 evenly spaced values, all exact
    /// in `f32`).
    pub weights: bool,
    /// The seed of the random stream.
    pub seed: u64,
}

impl RmatParams {
    /// `2^scale` vertices and `edges` edges with the Graph500 probabilities, duplicates and self
    /// loops allowed, directed, in stream order, unweighted, seed [`DEFAULT_SEED`].
    pub fn new(scale: u32, edges: u64) -> Self {
        RmatParams {
            scale_log2: scale,
            vertices: None,
            edges,
            a: DEFAULT_A,
            b: DEFAULT_B,
            c: DEFAULT_C,
            no_duplicates: false,
            no_self_loops: false,
            undirected: false,
            sorted: false,
            weights: false,
            seed: DEFAULT_SEED,
        }
    }

    /// The number of vertices: `vertices` when set, else `2^scale_log2` (saturating).
    pub fn n_vertices(&self) -> u64 {
        self.vertices
            .unwrap_or_else(|| 1u64.checked_shl(self.scale_log2).unwrap_or(u64::MAX))
    }

    /// The probability of the bottom-right quadrant, `1 - a - b - c`.
    pub fn d(&self) -> f64 {
        (1.0 - self.a - self.b - self.c).max(0.0)
    }

    /// Levels of the recursion: ids are drawn below `2^gen_scale()`.
    fn gen_scale(&self) -> u32 {
        match self.vertices {
            Some(n) if n > 1 => 64 - (n - 1).leading_zeros(),
            Some(_) => 0,
            None => self.scale_log2,
        }
    }

    /// How many distinct edges the options allow (the bound `no_duplicates` checks `M` against).
    pub fn max_distinct_edges(&self) -> u128 {
        let n = self.n_vertices() as u128;
        let pairs = if self.undirected {
            n * (n + 1) / 2
        } else {
            n * n
        };
        if self.no_self_loops {
            pairs - n
        } else {
            pairs
        }
    }

    /// Checks the parameters, saying what is wrong.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(m));
        for (name, p) in [("a", self.a), ("b", self.b), ("c", self.c)] {
            if !(0.0..=1.0).contains(&p) {
                return bad(format!(
                    "R-MAT probability {name} = {p} must lie between 0 and 1"
                ));
            }
        }
        let sum = self.a + self.b + self.c;
        if sum > 1.0 + 1e-9 {
            return bad(format!(
                "R-MAT probabilities a + b + c = {} + {} + {} = {sum} exceed 1 (d = 1 - a - b - c \
                 must not be negative)",
                self.a, self.b, self.c
            ));
        }
        match self.vertices {
            Some(0) => return bad("the vertex count must be at least 1".into()),
            Some(n) if n > MAX_VERTICES => {
                return bad(format!(
                    "{n} vertices is too many: gmcl reads ids up to 4294967294, so at most \
                     {MAX_VERTICES} vertices"
                ))
            }
            None if self.scale_log2 > 31 => {
                return bad(format!(
                    "scale {} is too large: gmcl reads ids up to 4294967294, so the scale is at \
                     most 31 (or give --vertices, up to {MAX_VERTICES})",
                    self.scale_log2
                ))
            }
            _ => {}
        }
        if usize::try_from(self.edges).is_err() {
            return bad(format!("{} edges do not fit in memory", self.edges));
        }
        let n = self.n_vertices();
        if self.no_self_loops && n == 1 && self.edges > 0 {
            return bad(
                "a graph with one vertex has no edge other than a self loop; allow self loops \
                 or add vertices"
                    .into(),
            );
        }
        if self.no_duplicates && self.edges as u128 > self.max_distinct_edges() {
            return bad(format!(
                "cannot make {} distinct edges: {n} vertices allow only {} distinct {}edges{}",
                self.edges,
                self.max_distinct_edges(),
                if self.undirected { "undirected " } else { "" },
                if self.no_self_loops {
                    " without self loops"
                } else {
                    ""
                }
            ));
        }
        Ok(())
    }
}

/// Generates the R-MAT graph `p` describes: `p.edges` edges over `p.n_vertices()` vertices.
pub fn generate(p: &RmatParams) -> Result<EdgeList> {
    p.validate()?;
    let rm = stream::Rmat::new(p);
    let mut batch = if p.no_duplicates {
        select::first_distinct(&rm, p.edges)?
    } else {
        select::first_accepted(&rm, p.edges)?
    };
    crate::interrupt::check()?;
    if p.sorted {
        sort::sort_batch(&mut batch, rm.k);
        crate::interrupt::check()?;
    }
    Ok(EdgeList::square(
        p.n_vertices() as usize,
        batch.edges,
        batch.weights,
    ))
}
