//! Small values that cross module boundaries, named for what they are.

/// Global process id: index into the engine's process table (world ranks first).
pub type Gpid = u32;
