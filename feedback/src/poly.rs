//! Polyhedra as values: the statements' domains and the dependence relations a region is made
//! of, in constraint form, built from the folder's pieces and handed to isl through its
//! constraint matrices. Nothing here writes or reads isl's notation by hand: isl objects are
//! built with isl's constructors and read back with its accessors; text is only isl's own
//! printing, for reports and messages.
//!
//! A [`Polyhedra`] lives outside any isl context (a region is built before its analysis
//! allocates one, and may be analysed on another thread), and holds no parameters: traces
//! have concrete bounds. Large constants become parameters when isl is given the value
//! ([`Parameterizer`], the paper's §6).

use crate::affine::Affine;
use crate::islx::{self, isl};
use crate::params::Parameterizer;
use crate::Error;
use isl_rs::{BasicMap, BasicSet, Context, DimType, Map, Mat, Set, Space, UnionMap, UnionSet, Val};
use std::collections::HashMap;

/// A statement instance: the statement's name and its coordinates.
pub type Instance = (String, Vec<i64>);

/// A named tuple of a space: `S3[i0, i1]` is `S3` with 2 dimensions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tuple {
    pub name: String,
    pub dims: usize,
}

impl Tuple {
    pub fn new(name: &str, dims: usize) -> Tuple {
        Tuple {
            name: name.to_string(),
            dims,
        }
    }
}

/// One convex piece: integer points satisfying linear equalities (`row · x = 0`) and
/// inequalities (`row · x >= 0`) over the columns `[input dims, output dims, existentials,
/// 1]`. Existentials express strides (`i - 4e = 0`: `i` is a multiple of 4).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Convex {
    pub exists: usize,
    pub equalities: Vec<Vec<i64>>,
    pub inequalities: Vec<Vec<i64>>,
}

/// A union of convex pieces: a set over one tuple, or a map from one tuple to another.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Polyhedra {
    pub input: Tuple,
    /// `None` for a set.
    pub output: Option<Tuple>,
    pub pieces: Vec<Convex>,
}

/// isl's notation of many polyhedra ([`Polyhedra::isl_text`]), each shape printed by isl
/// once: tuple names take no part in isl's simplification, so polyhedra that differ only in
/// their names print alike but for the names (myocyte's one region has 35,000 statements and
/// 96,000 dependences, and 600 shapes among them; isl took 65 µs a polyhedron).
#[derive(Default)]
pub struct Printer {
    /// By shape (dimensions, then pieces), the text with the placeholder names.
    shapes: HashMap<(usize, Option<usize>), HashMap<Vec<Convex>, String>>,
}

impl Printer {
    const INPUT: &'static str = "__polyprof_input__";
    const OUTPUT: &'static str = "__polyprof_output__";

    /// The same text as `p.isl_text()`.
    pub fn text(&mut self, p: &Polyhedra) -> String {
        let named = |t: &Tuple| !t.name.is_empty() && !t.name.contains("__polyprof_");
        if !named(&p.input) || !p.output.as_ref().is_none_or(named) {
            // An anonymous tuple prints without a name: not a placeholder's place.
            return p.isl_text();
        }
        let dims = (p.input.dims, p.output.as_ref().map(|t| t.dims));
        let shapes = self.shapes.entry(dims).or_default();
        if !shapes.contains_key(&p.pieces[..]) {
            let placeholder = Polyhedra {
                input: Tuple::new(Self::INPUT, p.input.dims),
                output: p.output.as_ref().map(|t| Tuple::new(Self::OUTPUT, t.dims)),
                pieces: p.pieces.clone(),
            };
            // An error's message is the polyhedra's own: not shared.
            let Ok(text) = placeholder.try_isl_text() else {
                return p.isl_text();
            };
            shapes.insert(placeholder.pieces, text);
        }
        let shape = &shapes[&p.pieces[..]];
        let text = shape.replace(&format!("{}[", Self::INPUT), &format!("{}[", p.input.name));
        match &p.output {
            Some(out) => text.replace(&format!("{}[", Self::OUTPUT), &format!("{}[", out.name)),
            None => text,
        }
    }
}

/// A constraint row under construction, in wide arithmetic: an overflow drops the constraint
/// (an over-approximation), never wraps.
struct Row(Vec<i128>);

impl Row {
    fn zero(width: usize) -> Row {
        Row(vec![0; width])
    }

    /// Adds `sign * (coeffs · x + constant)` over the input dims.
    fn add_affine(&mut self, coeffs: &[i64], constant: i64, sign: i128) {
        let last = self.0.len() - 1;
        for (j, c) in coeffs.iter().enumerate().take(last) {
            self.0[j] += sign * i128::from(*c);
        }
        self.0[last] += sign * i128::from(constant);
    }

    fn finish(self) -> Option<Vec<i64>> {
        self.0.into_iter().map(|v| i64::try_from(v).ok()).collect()
    }
}

impl Polyhedra {
    /// The empty set over `name[..dims]`.
    pub fn empty_set(name: &str, dims: usize) -> Polyhedra {
        Polyhedra {
            input: Tuple::new(name, dims),
            output: None,
            pieces: Vec::new(),
        }
    }

    /// A folded stream's domain as a set over `name`.
    pub fn set_of(f: &folder::Folded, name: &str) -> Polyhedra {
        Polyhedra {
            input: Tuple::new(name, f.dims),
            output: None,
            pieces: f.pieces.iter().map(|p| convex(p, f.dims, None)).collect(),
        }
    }

    /// A folded stream as a map from its points (over `name`) to its labels (over
    /// `target`): a dependence from consumer instances to the producer's coordinates.
    pub fn map_of(f: &folder::Folded, name: &str, target: &str) -> Polyhedra {
        Polyhedra {
            input: Tuple::new(name, f.dims),
            output: Some(Tuple::new(target, f.labels)),
            pieces: f
                .pieces
                .iter()
                .map(|p| convex(p, f.dims, Some(f.labels)))
                .collect(),
        }
    }

    /// A schedule's map from `name[dims]` to an anonymous time vector whose entries are
    /// `rows` (each an affine function of the dimensions).
    pub fn schedule(name: &str, dims: usize, rows: &[Affine]) -> Polyhedra {
        let width = dims + rows.len() + 1;
        let equalities = rows
            .iter()
            .enumerate()
            .map(|(o, a)| {
                // t_o - (coeffs · i + constant) = 0
                let mut r = vec![0; width];
                r[dims + o] = 1;
                for (d, c) in a.coeffs.iter().enumerate().take(dims) {
                    r[d] = -c;
                }
                r[width - 1] = -a.constant;
                r
            })
            .collect();
        Polyhedra {
            input: Tuple::new(name, dims),
            output: Some(Tuple::new("", rows.len())),
            pieces: vec![Convex {
                exists: 0,
                equalities,
                inequalities: Vec::new(),
            }],
        }
    }

    /// A relation between anonymous vectors of length `n` (times, or iterations): one piece
    /// per entry of `pieces`, each given by its constraints over `[x, y, 1]`.
    pub fn relation(n: usize, pieces: Vec<Convex>) -> Polyhedra {
        Polyhedra {
            input: Tuple::new("", n),
            output: Some(Tuple::new("", n)),
            pieces,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Dimensions of the input and output tuples together.
    fn vars(&self) -> usize {
        self.input.dims + self.output.as_ref().map_or(0, |t| t.dims)
    }

    /// The same polyhedra with their tuples renamed by `names` (names not in it stay).
    pub fn renamed(&self, names: &HashMap<String, String>) -> Polyhedra {
        let rename = |t: &Tuple| Tuple {
            name: names
                .get(&t.name)
                .cloned()
                .unwrap_or_else(|| t.name.clone()),
            dims: t.dims,
        };
        Polyhedra {
            input: rename(&self.input),
            output: self.output.as_ref().map(rename),
            pieces: self.pieces.clone(),
        }
    }

    fn space(&self, ctx: &Context, nparam: usize) -> Result<Space, Error> {
        let e = || isl("building a space");
        let named = |s: Space| -> Result<Space, Error> {
            let mut s = s;
            for k in 0..nparam {
                s = s
                    .set_dim_name(DimType::Param, k as u32, &Parameterizer::name(k))
                    .map_err(e())?;
            }
            Ok(s)
        };
        match &self.output {
            None => named(tuple_named(
                Space::set_alloc(ctx, nparam as u32, self.input.dims as u32).map_err(e())?,
                DimType::Set,
                &self.input.name,
            )?),
            Some(out) => {
                let s = Space::alloc(ctx, nparam as u32, self.input.dims as u32, out.dims as u32)
                    .map_err(e())?;
                let s = tuple_named(s, DimType::In, &self.input.name)?;
                named(tuple_named(s, DimType::Out, &out.name)?)
            }
        }
    }

    /// Each piece's rows with their constants split into parameters and remainders, in the
    /// column order of isl's matrices, `[constant, parameters, variables, existentials]`
    /// (not [`Convex`]'s own order).
    fn isl_rows(&self, params: &mut Parameterizer) -> Vec<Convex> {
        let vars = self.vars();
        let mut split = |row: &Vec<i64>| -> (Vec<i64>, Option<(usize, i64)>) {
            let (body, constant) = row.split_at(row.len() - 1);
            let (c, param) = match params.split(constant[0]) {
                Some((k, sign, rest)) => (rest, Some((k, sign))),
                None => (constant[0], None),
            };
            let mut out = vec![c];
            out.extend_from_slice(&body[..vars]);
            out.extend_from_slice(&body[vars..]);
            (out, param)
        };
        type Split = (Vec<i64>, Option<(usize, i64)>);
        let pieces: Vec<(usize, Vec<Split>, Vec<Split>)> = self
            .pieces
            .iter()
            .map(|p| {
                (
                    p.exists,
                    p.equalities.iter().map(&mut split).collect(),
                    p.inequalities.iter().map(&mut split).collect(),
                )
            })
            .collect();
        // Parameters are known once every constant was seen.
        let nparam = params.count();
        let place = |(row, param): (Vec<i64>, Option<(usize, i64)>)| {
            let mut out = Vec::with_capacity(row.len() + nparam);
            out.push(row[0]);
            out.extend((0..nparam).map(|k| match param {
                Some((p, sign)) if p == k => sign,
                _ => 0,
            }));
            out.extend_from_slice(&row[1..]);
            out
        };
        pieces
            .into_iter()
            .map(|(exists, eq, ineq)| Convex {
                exists,
                equalities: eq.into_iter().map(place).collect(),
                inequalities: ineq.into_iter().map(place).collect(),
            })
            .collect()
    }

    /// The polyhedra as an isl union set (a set's) or union map (a map's), in `ctx`, with
    /// large constants turned into parameters by `params`.
    fn to_isl(&self, ctx: &Context, params: &mut Parameterizer) -> Result<Isl, Error> {
        let e = || isl("building a polyhedron");
        let rows = self.isl_rows(params);
        let nparam = params.count();
        let space = self.space(ctx, nparam)?;
        let width = |exists: usize| 1 + nparam + self.vars() + exists;
        let mut pieces = Vec::with_capacity(rows.len());
        for c in rows {
            let eq = matrix(ctx, &c.equalities, width(c.exists))?;
            let ineq = matrix(ctx, &c.inequalities, width(c.exists))?;
            let space = space.copy().map_err(e())?;
            pieces.push(match self.output {
                None => Isl::Set(
                    BasicSet::from_constraint_matrices(
                        space,
                        eq,
                        ineq,
                        DimType::Cst,
                        DimType::Param,
                        DimType::Set,
                        DimType::Div,
                    )
                    .and_then(Set::from_basic_set)
                    .map_err(e())?,
                ),
                Some(_) => Isl::Map(
                    BasicMap::from_constraint_matrices(
                        space,
                        eq,
                        ineq,
                        DimType::Cst,
                        DimType::Param,
                        DimType::In,
                        DimType::Out,
                        DimType::Div,
                    )
                    .and_then(Map::from_basic_map)
                    .map_err(e())?,
                ),
            });
        }
        let empty = match self.output {
            None => Isl::Set(Set::empty(space).map_err(e())?),
            Some(_) => Isl::Map(Map::empty(space).map_err(e())?),
        };
        pieces.into_iter().try_fold(empty, |acc, p| match (acc, p) {
            (Isl::Set(a), Isl::Set(b)) => a.union(b).map(Isl::Set).map_err(e()),
            (Isl::Map(a), Isl::Map(b)) => a.union(b).map(Isl::Map).map_err(e()),
            _ => Err(Error::Isl(
                "building a polyhedron: mixed sets and maps".into(),
            )),
        })
    }

    /// A set's polyhedra as an isl set.
    pub(crate) fn to_set(&self, ctx: &Context, params: &mut Parameterizer) -> Result<Set, Error> {
        match self.to_isl(ctx, params)? {
            Isl::Set(s) => Ok(s),
            Isl::Map(_) => Err(Error::Isl(format!(
                "{} is a map, not a set",
                self.input.name
            ))),
        }
    }

    /// A map's polyhedra as an isl map.
    pub(crate) fn to_map(&self, ctx: &Context, params: &mut Parameterizer) -> Result<Map, Error> {
        match self.to_isl(ctx, params)? {
            Isl::Map(m) => Ok(m),
            Isl::Set(_) => Err(Error::Isl(format!(
                "{} is a set, not a map",
                self.input.name
            ))),
        }
    }

    pub(crate) fn to_union_set(
        &self,
        ctx: &Context,
        params: &mut Parameterizer,
    ) -> Result<UnionSet, Error> {
        UnionSet::from_set(self.to_set(ctx, params)?).map_err(isl("building a union set"))
    }

    pub(crate) fn to_union_map(
        &self,
        ctx: &Context,
        params: &mut Parameterizer,
    ) -> Result<UnionMap, Error> {
        UnionMap::from_map(self.to_map(ctx, params)?).map_err(isl("building a union map"))
    }

    /// An isl set read back (its tuple's name, its pieces' constraints). `None` when the set
    /// has parameters, or when isl's pieces use integer divisions whose definitions the
    /// constraints alone do not carry (the value read back is checked equal to `set`).
    pub(crate) fn from_set(set: &Set) -> Option<Polyhedra> {
        let ctx = set.get_ctx();
        if set.dim(DimType::Param).ok()? != 0 {
            return None;
        }
        let dims = usize::try_from(set.dim(DimType::Set).ok()?).ok()?;
        let name = set_name(set);
        let list = set.get_basic_set_list().ok()?;
        let mut pieces = Vec::new();
        for k in 0..list.size().ok()? {
            let b = list.get_at(k).ok()?;
            let exists = usize::try_from(b.dim(DimType::Div).ok()?).ok()?;
            let order = (DimType::Set, DimType::Div, DimType::Param, DimType::Cst);
            let eq = b
                .equalities_matrix(order.0, order.1, order.2, order.3)
                .ok()?;
            let ineq = b
                .inequalities_matrix(order.0, order.1, order.2, order.3)
                .ok()?;
            pieces.push(Convex {
                exists,
                equalities: read_matrix(&eq)?,
                inequalities: read_matrix(&ineq)?,
            });
        }
        let out = Polyhedra {
            input: Tuple::new(&name, dims),
            output: None,
            pieces,
        };
        let back = out.to_set(&ctx, &mut Parameterizer::none()).ok()?;
        back.is_equal(set).ok()?.then_some(out)
    }

    /// An isl map read back, as [`Self::from_set`]; `None` also for a union of several
    /// spaces.
    pub(crate) fn from_union_map(map: &UnionMap) -> Option<Polyhedra> {
        let ctx = map.get_ctx();
        let list = map.get_map_list().ok()?;
        match list.size().ok()? {
            0 => None,
            1 => {
                let m = list.get_at(0).ok()?;
                let out = Self::from_map(&m)?;
                let back = out.to_map(&ctx, &mut Parameterizer::none()).ok()?;
                back.is_equal(&m).ok()?.then_some(out)
            }
            _ => None,
        }
    }

    /// An isl map read back without the equality check (the callers check).
    fn from_map(m: &Map) -> Option<Polyhedra> {
        if m.dim(DimType::Param).ok()? != 0 {
            return None;
        }
        let n_in = usize::try_from(m.dim(DimType::In).ok()?).ok()?;
        let n_out = usize::try_from(m.dim(DimType::Out).ok()?).ok()?;
        let input = Tuple::new(&map_name(m, DimType::In), n_in);
        let output = Tuple::new(&map_name(m, DimType::Out), n_out);
        let list = m.get_basic_map_list().ok()?;
        let mut pieces = Vec::new();
        for k in 0..list.size().ok()? {
            let b = list.get_at(k).ok()?;
            pieces.push(basic_map_rows(&b)?);
        }
        Some(Polyhedra {
            input,
            output: Some(output),
            pieces,
        })
    }

    /// isl's notation of the polyhedra (`{ S3[i0] : 0 <= i0 <= 15 }`), printed by isl: for
    /// reports and messages.
    pub fn isl_text(&self) -> String {
        self.try_isl_text().unwrap_or_else(|e| format!("({e})"))
    }

    fn try_isl_text(&self) -> Result<String, Error> {
        let ctx = quiet_context();
        let mut none = Parameterizer::none();
        match self.to_isl(&ctx, &mut none)? {
            Isl::Set(s) => islx::text(&s),
            Isl::Map(m) => UnionMap::from_map(m)
                .map_err(isl("printing"))
                .and_then(|u| islx::text(&u)),
        }
    }

    /// Polyhedra written in isl's notation, read by isl (tests, and schedules users give).
    pub fn parse(text: &str) -> Result<Polyhedra, Error> {
        let ctx = quiet_context();
        let bad = || {
            Error::Isl(format!(
                "reading `{text}` as one set or map without parameters"
            ))
        };
        if let Ok(s) = Set::read_from_str(&ctx, text) {
            return Self::from_set(&s).ok_or_else(bad);
        }
        let m = UnionMap::read_from_str(&ctx, text).map_err(isl("reading a map"))?;
        Self::from_union_map(&m).ok_or_else(bad)
    }

    /// Per piece of a map, each output dimension as an affine function of the input
    /// dimensions, where an equality of the piece defines it (`None` otherwise: a range, a
    /// division, a bound).
    pub fn outputs(&self) -> Vec<Vec<Option<Affine>>> {
        let (n_in, n_out) = (self.input.dims, self.output.as_ref().map_or(0, |t| t.dims));
        self.pieces
            .iter()
            .map(|p| {
                (0..n_out)
                    .map(|o| {
                        p.equalities.iter().find_map(|row| {
                            let c = row[n_in + o];
                            let others_zero = (0..n_out).all(|k| k == o || row[n_in + k] == 0)
                                && row[n_in + n_out..row.len() - 1].iter().all(|v| *v == 0);
                            // o = -(rest)/c, integral when c is ±1.
                            if c.abs() != 1 || !others_zero {
                                return None;
                            }
                            Some(Affine {
                                coeffs: row[..n_in].iter().map(|v| -v * c).collect(),
                                constant: -row[row.len() - 1] * c,
                            })
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// The point a set or map of one point holds: its input and output coordinates.
    pub fn single_point(&self) -> Option<(Vec<i64>, Vec<i64>)> {
        let [p] = self.pieces.as_slice() else {
            return None;
        };
        let n = self.vars();
        let mut values: Vec<Option<i64>> = vec![None; n];
        for row in &p.equalities {
            let nz: Vec<usize> = (0..row.len() - 1).filter(|&j| row[j] != 0).collect();
            if let [j] = nz.as_slice() {
                if *j < n && row[*j].abs() == 1 {
                    values[*j] = Some(-row[row.len() - 1] * row[*j]);
                }
            }
        }
        let values: Option<Vec<i64>> = values.into_iter().collect();
        let values = values?;
        let (a, b) = values.split_at(self.input.dims);
        Some((a.to_vec(), b.to_vec()))
    }
}

/// Sets (statements' domains) as one union set in `ctx`, without parameters.
pub(crate) fn union_of_sets<'p>(
    ctx: &Context,
    sets: impl IntoIterator<Item = &'p Polyhedra>,
) -> Result<UnionSet, Error> {
    let e = || isl("uniting sets");
    let mut out = UnionSet::empty_ctx(ctx).map_err(e())?;
    for p in sets {
        let s = p.to_union_set(ctx, &mut Parameterizer::none())?;
        out = out.union(s).map_err(e())?;
    }
    Ok(out)
}

/// Maps (dependences) as one union map in `ctx`, without parameters.
pub(crate) fn union_of_maps<'p>(
    ctx: &Context,
    maps: impl IntoIterator<Item = &'p Polyhedra>,
) -> Result<UnionMap, Error> {
    let e = || isl("uniting maps");
    let mut out = UnionMap::empty_ctx(ctx).map_err(e())?;
    for p in maps {
        let m = p.to_union_map(ctx, &mut Parameterizer::none())?;
        out = out.union(m).map_err(e())?;
    }
    Ok(out)
}

/// A context whose errors come back as values only: reading a map as a set first is expected
/// to fail, and must not print isl's complaint.
fn quiet_context() -> Context {
    let ctx = Context::alloc();
    // Setting an option on a fresh context cannot fail.
    let _ = isl_rs::Options::set_on_error(&ctx, 1);
    ctx
}

/// A set's tuple name, "" for an anonymous tuple. (isl-rs reads isl's answer for an anonymous
/// tuple, a null pointer, as a string: asking first is required.)
fn set_name(s: &Set) -> String {
    match s.has_tuple_name() {
        Ok(true) => s.get_tuple_name().map(str::to_string).unwrap_or_default(),
        _ => String::new(),
    }
}

/// A map's tuple name on side `t` (`In` or `Out`), "" for an anonymous tuple.
fn map_name(m: &Map, t: DimType) -> String {
    match m.has_tuple_name(t) {
        Ok(true) => m.get_tuple_name(t).map(str::to_string).unwrap_or_default(),
        _ => String::new(),
    }
}

/// An isl object built from [`Polyhedra`].
enum Isl {
    Set(Set),
    Map(Map),
}

/// `space` with its tuple `t` named `name`; an empty name leaves the tuple anonymous (a
/// schedule's time space).
fn tuple_named(space: Space, t: DimType, name: &str) -> Result<Space, Error> {
    if name.is_empty() {
        return Ok(space);
    }
    space.set_tuple_name(t, name).map_err(isl("naming a tuple"))
}

/// An isl matrix of `rows`, each `width` wide (an empty matrix has no rows).
pub(crate) fn matrix(ctx: &Context, rows: &[Vec<i64>], width: usize) -> Result<Mat, Error> {
    let e = || isl("building a constraint matrix");
    let mut m = Mat::alloc(ctx, rows.len() as u32, width as u32).map_err(e())?;
    for (r, row) in rows.iter().enumerate() {
        for c in 0..width {
            let v = row.get(c).copied().unwrap_or(0);
            let v = Val::int_from_si(ctx, v).map_err(e())?;
            m = m.set_element_val(r as i32, c as i32, v).map_err(e())?;
        }
    }
    Ok(m)
}

/// A matrix's rows, `None` if an entry is not an integer within i64.
fn read_matrix(m: &Mat) -> Option<Vec<Vec<i64>>> {
    let (rows, cols) = (m.rows().ok()?, m.cols().ok()?);
    (0..rows)
        .map(|r| {
            (0..cols)
                .map(|c| {
                    let v = m.get_element_val(r, c).ok()?;
                    match v.is_int().ok()? {
                        true => v.get_num_si().ok(),
                        false => None,
                    }
                })
                .collect()
        })
        .collect()
}

/// A basic map's constraints in [`Convex`]'s column order.
fn basic_map_rows(b: &BasicMap) -> Option<Convex> {
    let exists = usize::try_from(b.dim(DimType::Div).ok()?).ok()?;
    let order = (
        DimType::In,
        DimType::Out,
        DimType::Div,
        DimType::Param,
        DimType::Cst,
    );
    let eq = b
        .equalities_matrix(order.0, order.1, order.2, order.3, order.4)
        .ok()?;
    let ineq = b
        .inequalities_matrix(order.0, order.1, order.2, order.3, order.4)
        .ok()?;
    Some(Convex {
        exists,
        equalities: read_matrix(&eq)?,
        inequalities: read_matrix(&ineq)?,
    })
}

/// The two instances a sampled pair relates (a map of one point): `(S3, [1, 2])` and
/// `(S0, [2, 0])` for `{ S3[1, 2] -> S0[2, 0] }`.
pub(crate) fn sampled_pair(b: BasicMap) -> Option<(Instance, Instance)> {
    let p = Polyhedra::from_map(&Map::from_basic_map(b).ok()?)?;
    let (at, to) = p.single_point()?;
    Some(((p.input.name, at), (p.output?.name, to)))
}

/// A schedule's rows per statement: each output dimension of the first piece of its map as
/// an affine function of the statement's dimensions, `None` where no equality of that piece
/// defines it so (a division, a tile's `floor`). Parameters are left out: they shift rows,
/// they do not reorder.
pub(crate) fn schedule_rows(map: &UnionMap) -> Vec<(String, Vec<Option<Affine>>)> {
    let Ok(list) = map.get_map_list() else {
        return Vec::new();
    };
    let mut out: Vec<(String, Vec<Option<Affine>>)> = Vec::new();
    for k in 0..list.size().unwrap_or(0) {
        let Ok(m) = list.get_at(k) else { continue };
        let name = map_name(&m, DimType::In);
        let dims = |t| m.dim(t).ok().and_then(|d| usize::try_from(d).ok());
        let (Some(n_in), Some(n_out), Some(n_par)) =
            (dims(DimType::In), dims(DimType::Out), dims(DimType::Param))
        else {
            continue;
        };
        let first = m.get_basic_map_list().and_then(|l| l.get_at(0)).ok();
        let Some(c) = first.as_ref().and_then(basic_map_rows) else {
            continue;
        };
        // Columns: [in, out, divisions, parameters, 1]; parameters count as zero.
        let rows = (0..n_out)
            .map(|o| {
                c.equalities.iter().find_map(|row| {
                    let (divs_params, constant) =
                        row[n_in + n_out..].split_at(row.len() - n_in - n_out - 1);
                    let divs = &divs_params[..divs_params.len() - n_par];
                    let v = row[n_in + o];
                    let alone = (0..n_out).all(|q| q == o || row[n_in + q] == 0)
                        && divs.iter().all(|d| *d == 0);
                    (v.abs() == 1 && alone).then(|| Affine {
                        coeffs: row[..n_in].iter().map(|x| -x * v).collect(),
                        constant: -constant[0] * v,
                    })
                })
            })
            .collect();
        if !out.iter().any(|(n, _)| *n == name) {
            out.push((name, rows));
        }
    }
    out
}

/// The tuple names of a union set's spaces, in isl's order.
pub(crate) fn tuple_names(set: &UnionSet) -> Vec<String> {
    let Ok(list) = set.get_set_list() else {
        return Vec::new();
    };
    let n = list.size().unwrap_or(0);
    let mut names: Vec<String> = Vec::new();
    for k in 0..n {
        if let Ok(s) = list.get_at(k) {
            let name = set_name(&s);
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// The constraints of one folded piece: columns `[dims, labels, existentials, 1]`.
fn convex(p: &folder::Piece, dims: usize, labels: Option<usize>) -> Convex {
    let n_out = labels.unwrap_or(0);
    let exists = p
        .domain
        .bounds
        .iter()
        .filter(|b| b.lower != b.upper && b.stride > 1)
        .count();
    let width = dims + n_out + exists + 1;
    let mut out = Convex {
        exists,
        ..Convex::default()
    };
    let mut next_exist = dims + n_out;
    for (j, b) in p.domain.bounds.iter().enumerate() {
        // x_j - lower(x) (>= 0, or = 0 for a single value).
        let mut low = Row::zero(width);
        low.0[j] += 1;
        low.add_affine(&b.lower.coeffs, b.lower.constant, -1);
        if b.lower == b.upper {
            out.equalities.extend(low.finish());
            continue;
        }
        let mut high = Row::zero(width);
        high.0[j] -= 1;
        high.add_affine(&b.upper.coeffs, b.upper.constant, 1);
        out.inequalities.extend(high.finish());
        if b.stride > 1 {
            // x_j - lower(x) - stride * e = 0.
            let mut strided = Row(low.0.clone());
            strided.0[next_exist] -= i128::from(b.stride);
            next_exist += 1;
            out.equalities.extend(strided.finish());
        }
        out.inequalities.extend(low.finish());
    }
    for (c, l) in p.labels.iter().enumerate().take(n_out) {
        let col = dims + c;
        match l {
            folder::Label::Affine { coeffs, constant } => {
                let mut r = Row::zero(width);
                r.0[col] += 1;
                r.add_affine(coeffs, *constant, -1);
                out.equalities.extend(r.finish());
            }
            folder::Label::Range { min, max } => {
                let mut lo = Row::zero(width);
                lo.0[col] += 1;
                lo.0[width - 1] -= i128::from(*min);
                let mut hi = Row::zero(width);
                hi.0[col] -= 1;
                hi.0[width - 1] += i128::from(*max);
                if min == max {
                    out.equalities.extend(lo.finish());
                } else {
                    out.inequalities.extend(lo.finish());
                    out.inequalities.extend(hi.finish());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(points: &[(Vec<i64>, Vec<i64>)]) -> folder::Folded {
        folder::fold_points(points, &folder::FoldOptions::default())
    }

    #[test]
    fn a_folded_triangle_becomes_the_same_isl_set() {
        let mut pts = Vec::new();
        for i in 0..6 {
            for j in 0..=i {
                pts.push((vec![i, j], vec![]));
            }
        }
        let p = Polyhedra::set_of(&fold(&pts), "S3");
        let ctx = Context::alloc();
        let s = p.to_set(&ctx, &mut Parameterizer::none()).unwrap();
        let want = Set::read_from_str(&ctx, "{ S3[i, j] : 0 <= j <= i <= 5 }").unwrap();
        assert!(s.is_equal(&want).unwrap());
        // isl's printing leaves out what other constraints imply (0 <= i0).
        assert_eq!(p.isl_text(), "{ S3[i0, i1] : i0 <= 5 and 0 <= i1 <= i0 }");
    }

    #[test]
    fn strides_and_labels_make_existentials_and_output_equalities() {
        let pts: Vec<(Vec<i64>, Vec<i64>)> = (0..10)
            .map(|k| (vec![3 + 4 * k], vec![4 * k - 1]))
            .collect();
        let p = Polyhedra::map_of(&fold(&pts), "S1", "S0");
        assert_eq!(p.pieces.len(), 1);
        assert_eq!(p.pieces[0].exists, 1);
        let ctx = Context::alloc();
        let m = p.to_union_map(&ctx, &mut Parameterizer::none()).unwrap();
        let want = UnionMap::read_from_str(
            &ctx,
            "{ S1[i] -> S0[i - 4] : 3 <= i <= 39 and (i - 3) mod 4 = 0 }",
        )
        .unwrap();
        assert!(m.is_equal(&want).unwrap(), "{}", p.isl_text());
        assert_eq!(
            p.outputs(),
            vec![vec![Some(Affine {
                coeffs: vec![1],
                constant: -4
            })]]
        );
    }

    #[test]
    fn large_constants_become_parameters() {
        let pts: Vec<(Vec<i64>, Vec<i64>)> = (0..1024).map(|i| (vec![i], vec![i - 1])).collect();
        let p = Polyhedra::map_of(&fold(&pts), "S3", "S1");
        let ctx = Context::alloc();
        let mut params = Parameterizer::new(64, 20);
        let m = p.to_union_map(&ctx, &mut params).unwrap();
        assert_eq!(params.count(), 1);
        let want =
            UnionMap::read_from_str(&ctx, "[P0] -> { S3[i] -> S1[i - 1] : 0 <= i <= P0 }").unwrap();
        assert!(m.is_equal(&want).unwrap(), "{}", islx::text(&m).unwrap());
        assert_eq!(
            p.outputs()[0][0],
            Some(Affine {
                coeffs: vec![1],
                constant: -1
            })
        );
    }

    #[test]
    fn isl_values_read_back_exactly_or_not_at_all() {
        let p =
            Polyhedra::parse("{ S0[i, j] : 0 <= i <= 9 and 0 <= j <= i and i mod 2 = 0 }").unwrap();
        assert_eq!(p.input, Tuple::new("S0", 2));
        let m = Polyhedra::parse("{ S0[i] -> S2[i - 1, 7] : 1 <= i <= 9 }").unwrap();
        assert_eq!(m.output, Some(Tuple::new("S2", 2)));
        let rows = m.outputs();
        assert_eq!(rows[0][1].as_ref().map(|a| a.constant), Some(7));
        assert_eq!(
            Polyhedra::parse("{ S0[1, 2] -> S1[3] }")
                .unwrap()
                .single_point(),
            Some((vec![1, 2], vec![3]))
        );
        assert!(Polyhedra::parse("[n] -> { S0[i] : 0 <= i < n }").is_err());
        let mut names = HashMap::new();
        names.insert("S0".to_string(), "B1".to_string());
        assert_eq!(
            m.renamed(&names).isl_text(),
            "{ B1[i0] -> S2[-1 + i0, 7] : 0 < i0 <= 9 }"
        );
    }

    /// Sets with integer divisions (`floor`, `mod`) read back as the same sets: isl's
    /// constraints carry them as existentials, which the check against the original keeps
    /// honest.
    #[test]
    fn divisions_read_back_as_the_same_sets() {
        let ctx = quiet_context();
        for text in [
            "{ S[i] : 0 <= i <= 40 and floor(i/4) <= 2 }",
            "{ S[i, j] : 0 <= i <= 9 and 0 <= j <= 9 and (i + j) mod 3 = 0 }",
            "{ S[i] : 0 <= i <= 20 and i mod 4 = 1 }",
        ] {
            let set = Set::read_from_str(&ctx, text).unwrap();
            let p = Polyhedra::from_set(&set).unwrap_or_else(|| panic!("{text} not read back"));
            let back = p.to_set(&ctx, &mut Parameterizer::none()).unwrap();
            assert!(
                back.is_equal(&set).unwrap(),
                "{text} read back as {}",
                p.isl_text()
            );
        }
    }
}
