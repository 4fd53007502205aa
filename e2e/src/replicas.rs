//! Global replicas for the high-availability tests and benches (issue 36): several `global-cp`
//! processes on one PostgreSQL database, each a [`CpProcess`].

use std::path::PathBuf;

use crate::CpProcess;

impl CpProcess {
    /// Start the Global `binary` as replica `name` of the PostgreSQL database at `url`
    /// (`--store postgres`; [`CpProcess::start`] picks its ports, its inter-CP one included).
    ///
    /// # Errors
    /// As [`CpProcess::start`].
    pub async fn start_global_replica(
        binary: &str,
        url: &str,
        name: &str,
        log: PathBuf,
    ) -> anyhow::Result<CpProcess> {
        let args = [
            "--store",
            "postgres",
            "--postgres-url",
            url,
            "--replica-name",
            name,
        ];
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        Self::start(binary, "--kds-addr", &args, &[], log).await
    }
}
