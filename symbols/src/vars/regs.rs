//! x86-64 DWARF register numbers (System V psABI, "DWARF Register Number
//! Mapping"): constants for the common ones, and lookup by name.

/// General-purpose registers in DWARF order (0-15), each with its 64-, 32-,
/// 16- and 8-bit names: DWARF numbers a whole register, so a sub-register
/// names the same number.
const GPRS: [[&str; 4]; 16] = [
    ["rax", "eax", "ax", "al"],
    ["rdx", "edx", "dx", "dl"],
    ["rcx", "ecx", "cx", "cl"],
    ["rbx", "ebx", "bx", "bl"],
    ["rsi", "esi", "si", "sil"],
    ["rdi", "edi", "di", "dil"],
    ["rbp", "ebp", "bp", "bpl"],
    ["rsp", "esp", "sp", "spl"],
    ["r8", "r8d", "r8w", "r8b"],
    ["r9", "r9d", "r9w", "r9b"],
    ["r10", "r10d", "r10w", "r10b"],
    ["r11", "r11d", "r11w", "r11b"],
    ["r12", "r12d", "r12w", "r12b"],
    ["r13", "r13d", "r13w", "r13b"],
    ["r14", "r14d", "r14w", "r14b"],
    ["r15", "r15d", "r15w", "r15b"],
];

/// DWARF number of `rax`.
pub const RAX: u16 = 0;
/// DWARF number of `rdx`.
pub const RDX: u16 = 1;
/// DWARF number of `rcx`.
pub const RCX: u16 = 2;
/// DWARF number of `rbx`.
pub const RBX: u16 = 3;
/// DWARF number of `rsi`.
pub const RSI: u16 = 4;
/// DWARF number of `rdi`.
pub const RDI: u16 = 5;
/// DWARF number of `rbp`.
pub const RBP: u16 = 6;
/// DWARF number of `rsp`.
pub const RSP: u16 = 7;
/// DWARF number of `rip` (the return-address column).
pub const RIP: u16 = 16;
/// DWARF number of `xmm0`; `xmm1`-`xmm15` follow (17-32).
pub const XMM0: u16 = 17;

/// The DWARF register number of an x86-64 register named as in Intel
/// syntax, case-insensitively: `rax`…`r15` and their 32/16/8-bit parts
/// (`eax`, `ax`, `al`, `r8d`…; `ah`/`bh`/`ch`/`dh` too), `rip`,
/// `xmm0`-`xmm31` (`ymmN`/`zmmN` give the same number: DWARF has one column
/// per vector register), `st0`-`st7`, `mm0`-`mm7`.
///
/// ```
/// assert_eq!(symbols::dwarf_register("rbx"), Some(3));
/// assert_eq!(symbols::dwarf_register("EDX"), Some(1));
/// assert_eq!(symbols::dwarf_register("xmm3"), Some(20));
/// assert_eq!(symbols::dwarf_register("flags"), None);
/// ```
pub fn dwarf_register(name: &str) -> Option<u16> {
    let name = name.to_ascii_lowercase();
    if let Some(n) = GPRS.iter().position(|names| names.contains(&name.as_str())) {
        return u16::try_from(n).ok();
    }
    let high = ["ah", "dh", "ch", "bh"];
    if let Some(n) = high.iter().position(|&h| h == name) {
        return u16::try_from(n).ok();
    }
    if name == "rip" {
        return Some(RIP);
    }
    let numbered = |prefix: &str, count: u16| -> Option<u16> {
        let digits = name.strip_prefix(prefix)?;
        // "xmm03" or "xmm+1" are not register names.
        if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
            return None;
        }
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u16 = digits.parse().ok()?;
        (n < count).then_some(n)
    };
    for prefix in ["xmm", "ymm", "zmm"] {
        if let Some(n) = numbered(prefix, 32) {
            // xmm16-31 (AVX-512) are numbered 67-82.
            return Some(if n < 16 { XMM0 + n } else { 67 + n - 16 });
        }
    }
    if let Some(n) = numbered("st", 8) {
        return Some(33 + n);
    }
    if let Some(n) = numbered("mm", 8) {
        return Some(41 + n);
    }
    None
}

/// The 64-bit (or vector) name of DWARF register `reg`, for messages:
/// `rax`, `xmm3`, `st0`…; `None` for numbers [`dwarf_register`] does not
/// produce.
pub fn dwarf_register_name(reg: u16) -> Option<String> {
    match reg {
        0..=15 => Some(GPRS[usize::from(reg)][0].to_string()),
        RIP => Some("rip".into()),
        17..=32 => Some(format!("xmm{}", reg - XMM0)),
        33..=40 => Some(format!("st{}", reg - 33)),
        41..=48 => Some(format!("mm{}", reg - 41)),
        67..=82 => Some(format!("xmm{}", reg - 67 + 16)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        for (name, n) in [
            ("rax", 0),
            ("rdx", 1),
            ("rcx", 2),
            ("rbx", 3),
            ("rsi", 4),
            ("rdi", 5),
            ("rbp", 6),
            ("rsp", 7),
            ("r8", 8),
            ("r15", 15),
            ("xmm0", 17),
            ("xmm15", 32),
            ("xmm16", 67),
            ("xmm31", 82),
            ("st0", 33),
            ("mm7", 48),
        ] {
            assert_eq!(dwarf_register(name), Some(n), "{name}");
            assert_eq!(dwarf_register_name(n).as_deref(), Some(name), "{n}");
        }
        for (alias, n) in [
            ("eax", 0),
            ("AX", 0),
            ("al", 0),
            ("ah", 0),
            ("r9d", 9),
            ("r10w", 10),
            ("r11b", 11),
            ("sil", 4),
            ("ymm3", 20),
            ("ZMM2", 19),
            ("rip", RIP),
        ] {
            assert_eq!(dwarf_register(alias), Some(n), "{alias}");
        }
        for bad in ["", "xmm", "xmm32", "xmm03", "r16", "st8", "eflags", "xmm-1"] {
            assert_eq!(dwarf_register(bad), None, "{bad}");
        }
        assert_eq!(dwarf_register_name(49), None);
    }
}
