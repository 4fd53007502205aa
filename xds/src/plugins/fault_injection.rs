//! MeshFaultInjection and the old FaultInjection (placeholder: not applied yet).

use super::PluginInput;
use crate::generate::GenerateError;
use crate::snapshot::Snapshot;

/// Apply MeshFaultInjection and the old FaultInjection to `snap` (not implemented yet: leaves it unchanged).
///
/// # Errors
/// Never yet.
pub fn apply(_snap: &mut Snapshot, _input: &PluginInput<'_>) -> Result<(), GenerateError> {
    Ok(())
}
