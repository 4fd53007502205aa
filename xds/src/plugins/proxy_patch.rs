//! MeshProxyPatch and the old ProxyTemplate (placeholder: not applied yet).

use super::PluginInput;
use crate::generate::GenerateError;
use crate::snapshot::Snapshot;

/// Apply MeshProxyPatch and the old ProxyTemplate to `snap` (not implemented yet: leaves it unchanged).
///
/// # Errors
/// Never yet.
pub fn apply(_snap: &mut Snapshot, _input: &PluginInput<'_>) -> Result<(), GenerateError> {
    Ok(())
}
