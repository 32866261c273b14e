use std::path::PathBuf;

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address of the mapping.
    pub start: u64,
    /// One past the last address of the mapping.
    pub end: u64,
    /// Permissions as in the file, e.g. `*b"r-xp"`.
    pub perms: [u8; 4],
    /// File offset of `start`.
    pub offset: u64,
    /// Inode of the mapped file (0 for anonymous mappings).
    pub inode: u64,
    /// The path column: a file path, a pseudo path such as `[heap]`,
    /// `[stack]` or `[vdso]`, or `None` for anonymous mappings. A file that
    /// was deleted keeps the kernel's ` (deleted)` suffix.
    pub path: Option<PathBuf>,
}

impl Mapping {
    /// Readable.
    pub fn is_read(&self) -> bool {
        self.perms[0] == b'r'
    }

    /// Writable.
    pub fn is_write(&self) -> bool {
        self.perms[1] == b'w'
    }

    /// Executable.
    pub fn is_exec(&self) -> bool {
        self.perms[2] == b'x'
    }

    /// The permissions as text, e.g. `r-xp`.
    pub fn perms_str(&self) -> String {
        String::from_utf8_lossy(&self.perms).into_owned()
    }

    /// Whether the mapping is backed by a file (its path is absolute).
    pub fn is_file(&self) -> bool {
        self.path.as_ref().is_some_and(|p| p.is_absolute())
    }

    /// Whether `addr` lies inside the mapping.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }
}

/// The mappings of process `pid`, from `/proc/PID/maps`.
pub fn read_proc_maps(pid: i32) -> std::io::Result<Vec<Mapping>> {
    Ok(parse_proc_maps(&std::fs::read_to_string(format!(
        "/proc/{pid}/maps"
    ))?))
}

/// Parse the text of `/proc/PID/maps`. Lines that do not parse are skipped.
pub fn parse_proc_maps(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Mapping> {
    // "start-end perms offset dev inode   path"
    let mut rest = line.trim_start();
    let mut fields = [""; 5];
    for field in &mut fields {
        let end = rest
            .find(|c: char| c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        *field = &rest[..end];
        rest = rest[end..].trim_start();
    }
    let [range, perms, offset, _dev, inode] = fields;
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let perms: [u8; 4] = perms.as_bytes().try_into().ok()?;
    let offset = u64::from_str_radix(offset, 16).ok()?;
    let inode = inode.parse().ok()?;
    let path = rest.trim_end_matches(['\n', '\r']);
    let path = (!path.is_empty()).then(|| PathBuf::from(path));
    Some(Mapping {
        start,
        end,
        perms,
        offset,
        inode,
        path,
    })
}
