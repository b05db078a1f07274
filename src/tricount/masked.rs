//! The masked products on the SpGEMM engine ([`Method::Spgemm`](super::Method::Spgemm)): one
//! of the [`Form`]s of `U` and `L = Uᵀ` whose entries sum to the count, chosen by its
//! intermediate products, and the row and column sums that give the per-vertex counts.

use super::orient::Oriented;
use super::{Form, Options, Triangles};
use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use crate::spgemm::gpu::GpuTuning;
use crate::spgemm::{self, EngineKind, Pattern, ProductStats, SpgemmOptions};
use rayon::prelude::*;

/// The vertex of a triangle `a < b < c` that a row or a column of a product stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Low,
    Mid,
    High,
}

impl Form {
    /// Which role (lowest, middle, highest vertex of a triangle) a row and a column of the
    /// product stand for.
    fn roles(self) -> (Role, Role) {
        match self {
            Form::Sandia | Form::Auto => (Role::Low, Role::High),
            Form::Dot => (Role::High, Role::Mid),
            Form::DotUpper => (Role::Low, Role::Mid),
        }
    }
}

impl Oriented {
    /// The oriented graph as an `f64` matrix of ones.
    fn upper(&self) -> Result<Csr<f64>> {
        let n = self.n();
        if n > u32::MAX as usize + 1 {
            return Err(Error::Invalid(format!(
                "{n} vertices do not fit 32-bit indices"
            )));
        }
        Ok(Csr::from_parts_unchecked(
            n,
            n,
            self.ptr.clone(),
            self.adj.clone(),
            vec![1.0; self.adj.len()],
        ))
    }

    /// Intermediate products of each form: `Σ in·out`, `Σ out²`, `Σ in²`.
    fn form_costs(&self) -> [(Form, u64); 3] {
        let (mut sandia, mut dot, mut dot_upper) = (0u64, 0u64, 0u64);
        for (u, &i) in self.indeg.iter().enumerate() {
            let o = self.ptr[u + 1] - self.ptr[u];
            sandia += i * o;
            dot += o * o;
            dot_upper += i * i;
        }
        [
            (Form::Sandia, sandia),
            (Form::Dot, dot),
            (Form::DotUpper, dot_upper),
        ]
    }

    /// The engine path: one masked product for the count, a second one (another form) when the
    /// per-vertex counts need the role the first one does not give.
    pub(super) fn count_spgemm(
        &self,
        opts: &Options,
        out: &mut Triangles,
    ) -> Result<(u64, Option<Vec<u64>>)> {
        let engine = opts.engine;
        let mut costs = self.form_costs();
        costs.sort_by_key(|&(_, c)| c);
        let first = match opts.form {
            Form::Auto => costs[0].0,
            f => f,
        };
        let second = costs
            .iter()
            .map(|&(f, _)| f)
            .find(|&f| f != first)
            .unwrap_or(Form::Sandia);
        let u = self.upper()?;
        let needs_l = |f: Form| matches!(f, Form::Dot | Form::DotUpper);
        let l = if needs_l(first) || (opts.per_vertex && needs_l(second)) {
            Some(u.transpose())
        } else {
            None
        };
        let tuning = GpuTuning {
            poison: opts.gpu.poison,
            profile: opts.gpu.profile,
            ..Default::default()
        };
        let (c, stats) = masked_product(engine, &tuning, first, &u, l.as_ref())?;
        out.forms.push(first);
        out.intermediate_products += stats.intermediate_products;
        out.product_seconds += stats.seconds;
        let total = sum_entries(&c);
        if !opts.per_vertex {
            return Ok((total, None));
        }
        let n = self.n();
        let mut counts = vec![0u64; n];
        let (r1, c1) = first.roles();
        add_row_sums(&c, &mut counts);
        add_col_sums(&c, &mut counts);
        drop(c);
        let (c2, stats2) = masked_product(engine, &tuning, second, &u, l.as_ref())?;
        out.forms.push(second);
        out.intermediate_products += stats2.intermediate_products;
        out.product_seconds += stats2.seconds;
        // The second product gives the missing role through its rows or its columns.
        let (r2, col2) = second.roles();
        if r2 != r1 && r2 != c1 {
            add_row_sums(&c2, &mut counts);
        } else if col2 != r1 && col2 != c1 {
            add_col_sums(&c2, &mut counts);
        }
        Ok((total, Some(counts)))
    }
}

/// One masked product of the engine. `l` is `Uᵀ` (needed by the dot forms).
fn masked_product(
    engine: EngineKind,
    tuning: &GpuTuning,
    form: Form,
    u: &Csr<f64>,
    l: Option<&Csr<f64>>,
) -> Result<(Csr<f64>, ProductStats)> {
    let need_l =
        || l.ok_or_else(|| Error::Invalid("internal: the dot forms need the transpose".into()));
    let (a, b, mask) = match form {
        Form::Sandia | Form::Auto => (u, u, u),
        Form::Dot => {
            let l = need_l()?;
            (l, u, l)
        }
        Form::DotUpper => (u, need_l()?, u),
    };
    let opts = SpgemmOptions {
        mask: Some(Pattern::of(mask)),
        rows: None,
        gpu: tuning.clone(),
    };
    spgemm::multiply(engine, a, b, &opts)
}

/// The sum of a product's entries, each an exact small integer.
fn sum_entries<T: Scalar>(c: &Csr<T>) -> u64 {
    c.values().par_iter().map(|v| v.to_f64() as u64).sum()
}

fn add_row_sums<T: Scalar>(c: &Csr<T>, counts: &mut [u64]) {
    counts.par_iter_mut().enumerate().for_each(|(i, t)| {
        *t += c.row(i).1.iter().map(|v| v.to_f64() as u64).sum::<u64>();
    });
}

fn add_col_sums<T: Scalar>(c: &Csr<T>, counts: &mut [u64]) {
    for (&j, v) in c.col_idx().iter().zip(c.values()) {
        counts[j as usize] += v.to_f64() as u64;
    }
}
