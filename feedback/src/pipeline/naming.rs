//! Storage naming: memory, arrays, heap blocks, stack slots and registers named for a person
//! by the source variables debug information gives (a global by its symbol, a heap block by
//! the variable holding it and its allocation site, a stack slot by its frame), and the
//! function a direct call goes to.

use super::{insn_at, Code};
use crate::heap::{Block, Place, STACK_START};
use symbols::Loaded;

pub(super) const GPR_NAMES: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];

/// A register of the register shadow, by its offset there.
pub(super) fn register_name(offset: u64) -> String {
    match offset {
        o if o < 128 => GPR_NAMES[(o / 8) as usize].to_string(),
        o => format!("xmm{}", (o - 128) / 32),
    }
}

/// The name of the function a direct call goes to (`printf`), when the binary names it.
pub(super) fn callee_name(insn: &iced_x86::Instruction, bin: Loaded<'_>) -> Option<String> {
    if insn.op0_kind() != iced_x86::OpKind::NearBranch64 {
        return None;
    }
    let target = insn.near_branch_target();
    Some(match bin.import_for_plt_stub(target) {
        Some(name) => name.split('@').next().unwrap_or(name).to_string(),
        None => bin.describe(target),
    })
}

/// A function as a frame's name: a C++ signature without its return type, template
/// arguments and parameters (`std::__niter_base` for `double const* std::__niter_base<double
/// const*, std::vector<...> >(__gnu_cxx::__normal_iterator<...>)`), which a storage's name
/// repeats. Other names as they are.
pub(super) fn frame_name(function: &str) -> String {
    if !function.ends_with(')') {
        return function.to_string();
    }
    let mut depth = 0i32;
    let mut out = String::new();
    for c in function.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 => break,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let name = out.split_whitespace().last().unwrap_or("");
    if name.is_empty() || depth != 0 || name.contains("operator") {
        function.to_string()
    } else {
        name.to_string()
    }
}

/// Names the memory at `addr` for a person: a global by symbol, a heap block by allocation
/// site, a stack slot by function.
pub(super) fn name_memory(addr: u64, bin: Loaded<'_>, code: &Code, frames: &[String]) -> String {
    name_memory_at(addr, bin, code, frames, true, &[])
}

/// `` `s` `` or `` `a`+16 ``, as globals are named.
pub(super) fn with_offset(var: &str, off: u64) -> String {
    if off == 0 {
        format!("`{var}`")
    } else {
        format!("`{var}`+{off}")
    }
}

/// The source variable debug information places in register `reg` where the consumer `cons`
/// reads it, or just after the producer `prod` writes it (a location starts after the
/// instruction that writes it).
pub(super) fn register_variable(
    bin: Loaded<'_>,
    code: &Code,
    reg: &str,
    cons: u64,
    prod: u64,
) -> Option<symbols::Variable> {
    let number = symbols::dwarf_register(reg)?;
    let after = insn_at(code, prod).map(|i| i.next_ip());
    [Some(cons), after]
        .into_iter()
        .flatten()
        .find_map(|pc| bin.variable_in_register(pc, number))
}

/// The frame slot the instruction at `pc` reaches through its memory operand `[rbp + disp]`
/// or `[rsp + disp]`: (DWARF number of the base register, displacement). An indexed operand
/// gives the displacement, where the array it indexes starts.
fn frame_operand(code: &Code, pc: u64) -> Option<(u16, i64)> {
    use iced_x86::{OpKind, Register};
    let insn = insn_at(code, pc)?;
    if !(0..insn.op_count()).any(|o| insn.op_kind(o) == OpKind::Memory) {
        return None;
    }
    let base = match insn.memory_base() {
        Register::RBP => symbols::regs::RBP,
        Register::RSP => symbols::regs::RSP,
        _ => return None,
    };
    Some((base, insn.memory_displacement64() as i64))
}

/// The stack variable, and the offset inside it, that one of the instructions at `pcs`
/// reaches through its memory operand (see [`frame_operand`]): the frame a variable lives in
/// is known statically, from the call frame information at the instruction.
pub(super) fn stack_variable(
    bin: Loaded<'_>,
    code: &Code,
    pcs: &[u64],
) -> Option<symbols::Variable> {
    pcs.iter().find_map(|&pc| {
        let (base, disp) = frame_operand(code, pc)?;
        bin.stack_variable(pc, base, disp)
    })
}

/// The source variable that holds the start of heap block `block`, and the call depth it
/// does so at: the holder in the shallowest frame that debug information names (see
/// [`crate::heap`]).
fn heap_variable(bin: Loaded<'_>, code: &Code, block: &Block) -> Option<(String, u32)> {
    heap_variable_within(bin, code, block, 0)
}

/// [`heap_variable`], `nesting` blocks deep: a block whose start is kept in another block
/// (a row of a C++ `vector<vector<double>>`, its start in the outer vector's elements) is
/// named by that block's variable, as its elements: `` b[...] ``.
fn heap_variable_within(
    bin: Loaded<'_>,
    code: &Code,
    block: &Block,
    nesting: u32,
) -> Option<(String, u32)> {
    let mut holders = block.holders.clone();
    // Stable: among holders of one frame, the first.
    holders.sort_by_key(|h| h.depth);
    let held = holders.iter().find_map(|h| {
        let mut at = std::iter::once(h.pc).chain(h.at.iter().copied().take_while(|&a| a != 0));
        let var = match h.place {
            Place::Memory { addr } if nesting < 4 && code.heap.block(addr).is_some() => {
                let (_, outer) = code.heap.block(addr)?;
                let (var, depth) = heap_variable_within(bin, code, outer, nesting + 1)?;
                return Some((format!("{var}[...]"), depth));
            }
            Place::Memory { addr } if addr >= STACK_START => {
                // The slot the filling instruction reached, named where a location range
                // covers it (the stack pointer does not move between calls at -O2).
                let by_operand = frame_operand(code, h.pc).and_then(|(base, disp)| {
                    at.find_map(|a| {
                        let v = bin.stack_variable(a, base, disp)?;
                        (!library_variable(bin, a, &v)).then_some(v)
                    })
                    .filter(|v| v.offset == 0)
                });
                match by_operand {
                    Some(v) => v.name,
                    // Stored through a pointer (a C++ constructor fills `this->_M_start`):
                    // the user's variable whose address the program computed, at its start.
                    // A container's header (a Rust `Vec`'s pointer sits after its capacity)
                    // is named by its variable too.
                    None => {
                        stack_array_via_lea(bin, code, addr, &[], &[])
                            .filter(|a| {
                                (a.offset == 0 || a.size <= CONTAINER_HEADER) && !a.library
                            })?
                            .name
                    }
                }
            }
            Place::Memory { addr } => match bin.global_variable(addr) {
                Some(v) => (v.offset == 0).then_some(v.name)?,
                None => {
                    let (d, off) = bin.data_at(addr)?;
                    (off == 0).then(|| d.name.clone())?
                }
            },
            Place::Register { reg } => {
                let number = symbols::dwarf_register(GPR_NAMES[usize::from(reg)])?;
                at.skip(1)
                    .find_map(|a| {
                        let v = bin.variable_in_register(a, number)?;
                        (!library_variable(bin, a, &v)).then_some(v)
                    })?
                    .name
            }
        };
        Some((var, h.depth))
    });
    // No holder names it: the container its start was loaded from may be named.
    held.or_else(|| {
        let (_, outer) = code.heap.block(block.container?)?;
        if nesting >= 4 {
            return None;
        }
        let (var, depth) = heap_variable_within(bin, code, outer, nesting + 1)?;
        Some((format!("{var}[...]"), depth))
    })
}

/// Whether variable `v`, found at `pc`, is declared by library code inlined or called there
/// (`__p` in libstdc++'s uninitialized_fill_n, `result` in Rust's RawVec): no name the user
/// knows. Its declaring function's frame at `pc` says where that code's source is.
fn library_variable(bin: Loaded<'_>, pc: u64, v: &symbols::Variable) -> bool {
    let frames = bin.frames(pc);
    let declaring = v.function.as_deref().and_then(|name| {
        frames.iter().find(|f| {
            f.function
                .as_deref()
                .is_some_and(|g| g == name || g.ends_with(&format!("::{name}")))
        })
    });
    let library = |f: &symbols::Frame| {
        f.location
            .as_ref()
            .filter(|l| l.line > 0)
            .is_some_and(symbols::Loc::is_library)
    };
    match declaring {
        Some(f) => library(f),
        None => frames.first().is_some_and(library),
    }
}

/// Whether variable `v`, found at `pc`, is declared by a function among `pc`'s frames whose
/// code there is the program's own: stricter than [`library_variable`], for a variable
/// found by its address alone (Rust inlines `slice` of the standard library's indexing into
/// `main` even at -O0, its address computed on the user's line).
fn declared_by_user(bin: Loaded<'_>, pc: u64, v: &symbols::Variable) -> bool {
    let Some(name) = v.function.as_deref() else {
        return false;
    };
    bin.frames(pc).iter().any(|f| {
        f.function
            .as_deref()
            .is_some_and(|g| g == name || g.ends_with(&format!("::{name}")))
            && f.location
                .as_ref()
                .is_some_and(|l| l.line > 0 && !l.is_library())
    })
}

/// The line of the program's own code that led to the allocation of `block`: its allocator
/// call, or the innermost call on the way there that is not library code (a `vector`'s
/// constructor allocates in libstdc++).
fn allocation_line(bin: Loaded<'_>, block: &Block) -> String {
    let calls = block.calls.iter().rev().map(|r| r.wrapping_sub(1));
    std::iter::once(block.site)
        .chain(calls)
        .find(|&pc| user_code(bin, pc))
        .map_or_else(|| bin.source_line(block.site), |pc| bin.source_line(pc))
}

/// Whether the code at `pc` is, or has inlined into it, the program's own source.
fn user_code(bin: Loaded<'_>, pc: u64) -> bool {
    bin.frames(pc)
        .iter()
        .filter_map(|f| f.location.as_ref())
        .any(|l| l.line > 0 && !l.is_library())
}

/// The largest local whose field holding a heap block's start names the block: a container's
/// header (`std::vector`, Rust's `Vec` and `Box`), not a local array of pointers.
const CONTAINER_HEADER: u64 = 32;

/// A local array a pointer reaches, found from the instruction that computed its address.
struct FrameArray {
    name: String,
    /// Where in it the address is.
    offset: u64,
    size: u64,
    /// The function whose frame holds it (its declaring function, inlined or not).
    function: Option<String>,
    /// Not known to be declared by the program's own code (see [`declared_by_user`]).
    library: bool,
    /// The variable, with its scope.
    var: symbols::Variable,
}

/// The local array [`name_array`] names stack address `addr` by, with its scope.
pub(super) fn stack_array_variable(
    bin: Loaded<'_>,
    code: &Code,
    addr: u64,
    frames: &[String],
    pcs: &[u64],
) -> Option<symbols::Variable> {
    stack_array_via_lea(bin, code, addr, frames, pcs).map(|a| a.var)
}

/// The local variable holding stack address `addr`, from the `lea r, [rsp/rbp + disp]` (or
/// `mov r, rsp`) that computed a pointer to it (a loop that walks a local array through a
/// pointer register, a callee given the array): that instruction names a variable, and its
/// last value says where that variable was. With `frames` (the functions whose frames are
/// live at the access; empty: not known), only a `lea` of one of them counts: a function
/// that returned left its addresses to the next call's frame (hotspot3D's `readinput`
/// buffer `str` lies where `computeTempOMP` later spills registers). A `lea` hoisted above the
/// block that declares the array (gcc -O2 computes Rodinia nw's `input_itemsets_l` once,
/// before the loops whose body declares it) names it at `pcs`, the accesses, in the same
/// function: the stack pointer the `lea` read is the one they run with.
fn stack_array_via_lea(
    bin: Loaded<'_>,
    code: &Code,
    addr: u64,
    frames: &[String],
    pcs: &[u64],
) -> Option<FrameArray> {
    let live = |pc: u64| {
        frames.is_empty()
            || bin
                .function_at(pc)
                .is_some_and(|f| frames.contains(&f.name))
    };
    let mut found: Vec<(u64, FrameArray)> =
        code.heap
            .stack_leas
            .iter()
            .filter(|&(&pc, &value)| value <= addr && live(pc))
            .filter_map(|(&pc, &value)| {
                let (base, disp) = crate::heap::frame_address(&insn_at(code, pc)?)?;
                let base = match base {
                    iced_x86::Register::RBP => symbols::regs::RBP,
                    _ => symbols::regs::RSP,
                };
                let function = bin.function_at(pc).map(|f| f.address);
                let (pc, v) =
                    std::iter::once(pc)
                        .chain(pcs.iter().copied().filter(|&p| {
                            p != 0 && bin.function_at(p).map(|f| f.address) == function
                        }))
                        .find_map(|p| Some((p, bin.stack_variable(p, base, disp)?)))?;
                let start = value.checked_sub(v.offset)?;
                let offset = addr - start;
                let size = v.size?;
                (offset < size).then(|| {
                    let library = !declared_by_user(bin, pc, &v);
                    (
                        start,
                        FrameArray {
                            name: v.name.clone(),
                            offset,
                            size,
                            function: v.function.clone(),
                            library,
                            var: v,
                        },
                    )
                })
            })
            .collect();
    // One variable found by several `lea`s is the program's when one of them is.
    let user: Vec<(u64, String)> = found
        .iter()
        .filter(|(_, a)| !a.library)
        .map(|(start, a)| (*start, a.name.clone()))
        .collect();
    for (start, a) in &mut found {
        a.library &= !user.iter().any(|(s, n)| s == start && *n == a.name);
    }
    // The innermost: the variable starting closest below the address.
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    found.into_iter().next().map(|(_, a)| a)
}

/// How many elements an OpenMP clause's array section spans (`y[0:len]`) for the array holding
/// `addr`, when the code at `pc` reaches it through a pointer: a reduction on a pointer must
/// name a section. The innermost variable of the array's name visible at `pc` says, from debug
/// information, whether it is a pointer (an array parameter is one) and the size of what it
/// points to. Only for heap blocks and stack arrays reached through a `lea`, whose name is that
/// of a place holding their start: the pointer is taken to point there. `None` when that
/// variable is the array itself (a clause names it whole) or none is visible.
pub(super) fn pointer_section(addr: u64, bin: Loaded<'_>, code: &Code, pc: u64) -> Option<u64> {
    let (name, bytes) = match code.heap.block(addr) {
        Some((_, block)) => (heap_variable(bin, code, block)?.0, block.size),
        None if addr >= STACK_START => {
            let a = stack_array_via_lea(bin, code, addr, &[], &[pc])?;
            (a.name, a.size)
        }
        None => return None,
    };
    let var = bin.locals_at(pc).into_iter().find(|v| v.name == name)?;
    let each = var.pointee_size.filter(|&p| p > 0)?;
    bytes.is_multiple_of(each).then(|| bytes / each)
}

/// The array or block holding `addr`, without the offset inside it; `pcs`: instructions that
/// access it (0: none).
pub(super) fn name_array(
    addr: u64,
    bin: Loaded<'_>,
    code: &Code,
    frames: &[String],
    pcs: &[u64],
) -> String {
    name_memory_at(addr, bin, code, frames, false, pcs)
}

fn name_memory_at(
    addr: u64,
    bin: Loaded<'_>,
    code: &Code,
    frames: &[String],
    with_offset: bool,
    pcs: &[u64],
) -> String {
    let function = frame_name(frames.last().map_or("?", String::as_str));
    let function = function.as_str();
    let loc = |pc: u64| bin.source_line(pc);
    if let Some((d, off)) = bin.data_at(addr) {
        return if off == 0 || !with_offset {
            format!("`{}`", d.name)
        } else {
            format!("`{}`+{off}", d.name)
        };
    }
    if let Some((start, block)) = code.heap.block(addr) {
        let off = addr - start;
        return match heap_variable(bin, code, block) {
            Some((var, depth)) => {
                let var = if with_offset {
                    self::with_offset(&var, off)
                } else {
                    format!("`{var}`")
                };
                // A holder in library code (a C++ constructor's) allocated it there: the
                // program's own line that led to it instead.
                let call = block.call_at(depth);
                let line = if user_code(bin, call) {
                    loc(call)
                } else {
                    allocation_line(bin, block)
                };
                format!("{var} (heap block allocated at {line})")
            }
            None => {
                let what = format!(
                    "the heap block allocated at {}",
                    allocation_line(bin, block)
                );
                if off == 0 || !with_offset {
                    what
                } else {
                    format!("{what} (+{off})")
                }
            }
        };
    }
    if addr >= STACK_START {
        if let Some(a) = stack_array_via_lea(bin, code, addr, frames, pcs) {
            // The frame the array is in, not the function reaching it through a pointer.
            let frame = frame_name(a.function.as_deref().unwrap_or(function));
            return if with_offset {
                format!(
                    "{} (stack of {frame})",
                    self::with_offset(&a.name, a.offset)
                )
            } else {
                format!("`{}` (stack of {frame})", a.name)
            };
        }
        // An array's first access varies from one dependence to the next: name it by its
        // frame alone, so that all its dependences name one storage. A slot no variable
        // describes is named by its frame too: its run-time address means nothing in the
        // source (the storage's address keeps slots apart).
        return if with_offset {
            format!("a stack slot of {function}")
        } else {
            format!("a stack array of {function}")
        };
    }
    format!("memory at {addr:#x}")
}
