//! The GPU's pinned buffers lent to the exchanges that move device data between ranks through
//! host memory (rows of MCL's blocks, the triangle count's sums).

use super::words::{elements_mut, Wire};
use super::{agree, Comm};
use crate::error::{Error, Result};
use crate::gpu::transfer::Pinned;
use crate::gpu::Gpu;

/// Two pinned buffers of at least `words` words each (at most
/// [`crate::gpu::transfer::PINNED_WORDS`]; the GPU's staging pair where it is free), lent once
/// every kernel on the GPU is done (what is sent may have been written on any of its streams).
/// Collective: a rank that cannot have them is every rank's error.
pub(crate) fn lend<'g>(
    comm: &dyn Comm,
    gpu: &'g Gpu,
    words: usize,
    stage: &str,
) -> Result<Pinned<'g>> {
    let done = crate::gpu::prims::check(stage, gpu.ctx.synchronize());
    agree(comm, done.and_then(|()| gpu.pinned(words, stage)))
}

/// Pinned `words` as the elements a copy to or from the device moves (always aligned: the
/// buffers are page aligned and every span starts at a whole element).
pub(crate) fn elements<'w, E: Wire>(words: &'w mut [u32], stage: &str) -> Result<&'w mut [E]> {
    elements_mut(words)
        .ok_or_else(|| Error::gpu(stage, "the pinned buffer is not aligned for its elements"))
}
