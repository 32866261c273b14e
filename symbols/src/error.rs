use std::path::PathBuf;

/// Errors from opening an ELF file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened, inspected or mapped.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the ELF magic.
    #[error("{} is not an ELF file", path.display())]
    NotElf {
        /// The file.
        path: PathBuf,
    },
    /// The file is an ELF file for another machine (or 32-bit).
    #[error("{} is an ELF file for {machine}; only x86-64 is supported", path.display())]
    NotX86_64 {
        /// The file.
        path: PathBuf,
        /// Human-readable machine name, e.g. `aarch64` or `x86 (32-bit)`.
        machine: String,
    },
    /// The file is malformed.
    #[error("cannot parse ELF file {}: {msg}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        msg: String,
    },
}
