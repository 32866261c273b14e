/// Demangle a linker symbol name: Rust (legacy `_ZN…E` and v0 `_R…`) and
/// C++ (Itanium `_Z…`) names are demangled (Rust without the hash suffix);
/// anything else (C names, names that fail to demangle) is returned as is.
pub fn demangle(name: &str) -> String {
    if looks_rust(name) {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            return format!("{d:#}");
        }
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return d;
            }
        }
    }
    name.to_string()
}

/// Rust v0 names start with `_R`; Rust legacy names are `_ZN…E` possibly
/// followed by `.suffix` (a C++ function name would have parameter types
/// after the `E`).
fn looks_rust(name: &str) -> bool {
    if name.starts_with("_R") {
        return true;
    }
    if let Some(rest) = name.strip_prefix("_ZN") {
        // The suffix starts after the last `E.` (`..` also stands for `::` inside a
        // legacy name's components: `_ZN75_$LT$usize$u20$as$u20$core..slice..`).
        return rest.ends_with('E') || rest.contains("E.");
    }
    false
}
