//! Intercommunicator collectives and neighbourhood collectives.

use std::sync::Arc;

use super::sched::Sched;
use super::{Args, Views};
use crate::err;
use crate::error::Result;
use crate::runtime::Engine;

/// # Safety
/// As for `build`.
pub unsafe fn build(_e: &mut Engine, _comm: u32, _a: &Args) -> Result<Sched> {
    err!(
        Comm,
        "collectives on intercommunicators are not implemented yet"
    )
}

/// # Safety
/// As for `build`.
pub unsafe fn build_neighbor(
    _e: &mut Engine,
    _comm: u32,
    _a: &Args,
    _views: Arc<Views>,
) -> Result<Sched> {
    err!(Topology, "the communicator has no process topology")
}

/// The in-neighbours (sources) and out-neighbours (destinations) of a topology, as ranks
/// (None for MPI_PROC_NULL), with the sub-tags that pair sends and receives.
#[allow(clippy::type_complexity)]
pub fn neighbors(
    e: &Engine,
    comm: u32,
) -> Result<(Vec<(Option<usize>, i32)>, Vec<(Option<usize>, i32)>)> {
    e.comm(comm)?;
    err!(Topology, "the communicator has no process topology")
}
