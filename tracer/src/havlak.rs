//! Havlak's loop-nesting forest (Havlak 1997, "Nesting of reducible and irreducible loops"),
//! on any graph given as successor lists. Irreducible loops are found too: their header is the
//! entry reached first in depth-first order; their other entries stay inside the loop's region.
//!
//! The same construction serves the control-flow graph of a function (loops) and the call
//! graph (recursive components).

/// Index of a node in the graph given to [`loop_forest`].
pub type Node = usize;

/// One loop of the forest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    /// The header node.
    pub header: Node,
    /// The enclosing loop, if any.
    pub parent: Option<usize>,
    /// Nesting depth: 1 for outermost loops.
    pub depth: u32,
    /// True when the loop has more than one entry.
    pub irreducible: bool,
}

/// The loop-nesting forest of a graph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoopForest {
    pub loops: Vec<Loop>,
    /// Innermost loop containing each node (a header is inside its own loop). `None` for nodes
    /// in no loop and for nodes unreachable from the root.
    pub innermost: Vec<Option<usize>>,
    /// The loop each node heads, if any.
    pub heads: Vec<Option<usize>>,
}

impl LoopForest {
    /// True when `node` lies in loop `l` (or in a loop nested in it).
    pub fn contains(&self, l: usize, node: Node) -> bool {
        let mut cur = self.innermost.get(node).copied().flatten();
        let depth = self.loops[l].depth;
        while let Some(c) = cur {
            let lc = &self.loops[c];
            if c == l {
                return true;
            }
            if lc.depth <= depth {
                return false;
            }
            cur = lc.parent;
        }
        false
    }
}

struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn find(&mut self, mut x: usize) -> usize {
        let mut root = x;
        while self.parent[root] != root {
            root = self.parent[root];
        }
        while self.parent[x] != root {
            let next = self.parent[x];
            self.parent[x] = root;
            x = next;
        }
        root
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    NonHeader,
    SelfLoop,
    Reducible,
    Irreducible,
}

/// Computes the loop-nesting forest of the graph `succ` (successor lists) from `root`.
pub fn loop_forest(succ: &[Vec<Node>], root: Node) -> LoopForest {
    let n = succ.len();
    let mut forest = LoopForest {
        loops: Vec::new(),
        innermost: vec![None; n],
        heads: vec![None; n],
    };
    if root >= n {
        return forest;
    }
    const UNVISITED: usize = usize::MAX;
    // Preorder numbering by an iterative depth-first search.
    let mut number = vec![UNVISITED; n];
    let mut node_of = Vec::with_capacity(n);
    let mut last = Vec::with_capacity(n);
    let mut stack: Vec<(Node, usize)> = vec![(root, 0)];
    number[root] = 0;
    node_of.push(root);
    last.push(0);
    while let Some(&mut (v, ref mut i)) = stack.last_mut() {
        if let Some(&w) = succ[v].get(*i) {
            *i += 1;
            if number[w] == UNVISITED {
                number[w] = node_of.len();
                node_of.push(w);
                last.push(0);
                stack.push((w, 0));
            }
        } else {
            last[number[v]] = node_of.len() - 1;
            stack.pop();
        }
    }
    let m = node_of.len();
    let is_ancestor = |w: usize, v: usize, last: &[usize]| w <= v && v <= last[w];

    // Predecessors in preorder numbers, split into back and non-back edges.
    let mut back_preds: Vec<Vec<usize>> = vec![Vec::new(); m];
    let mut non_back_preds: Vec<Vec<usize>> = vec![Vec::new(); m];
    for (v, targets) in succ.iter().enumerate() {
        let nv = number[v];
        if nv == UNVISITED {
            continue;
        }
        for &w in targets {
            let nw = number[w];
            if is_ancestor(nw, nv, &last) {
                back_preds[nw].push(nv);
            } else if !non_back_preds[nw].contains(&nv) {
                non_back_preds[nw].push(nv);
            }
        }
    }

    let mut header: Vec<Option<usize>> = vec![None; m];
    let mut kind = vec![Kind::NonHeader; m];
    let mut loop_of: Vec<Option<usize>> = vec![None; m];
    let mut uf = UnionFind {
        parent: (0..m).collect(),
    };
    let mut in_pool = vec![false; m];
    for w in (0..m).rev() {
        let mut pool: Vec<usize> = Vec::new();
        for &v in &back_preds[w] {
            if v != w {
                let r = uf.find(v);
                if !in_pool[r] {
                    in_pool[r] = true;
                    pool.push(r);
                }
            } else {
                kind[w] = Kind::SelfLoop;
            }
        }
        if !pool.is_empty() {
            kind[w] = Kind::Reducible;
        }
        let mut work = pool.clone();
        while let Some(x) = work.pop() {
            for k in 0..non_back_preds[x].len() {
                let y = non_back_preds[x][k];
                let ydash = uf.find(y);
                if !is_ancestor(w, ydash, &last) {
                    kind[w] = Kind::Irreducible;
                    if !non_back_preds[w].contains(&ydash) {
                        non_back_preds[w].push(ydash);
                    }
                } else if ydash != w && !in_pool[ydash] {
                    in_pool[ydash] = true;
                    pool.push(ydash);
                    work.push(ydash);
                }
            }
        }
        if !pool.is_empty() || kind[w] == Kind::SelfLoop {
            let id = forest.loops.len();
            forest.loops.push(Loop {
                header: node_of[w],
                parent: None,
                depth: 0,
                irreducible: kind[w] == Kind::Irreducible,
            });
            loop_of[w] = Some(id);
            for &x in &pool {
                in_pool[x] = false;
                header[x] = Some(w);
                uf.parent[x] = w;
                if let Some(inner) = loop_of[x] {
                    forest.loops[inner].parent = Some(id);
                }
            }
        }
    }
    // Depths (parents are created after their children: resolve top-down).
    for l in 0..forest.loops.len() {
        let mut d = 1;
        let mut p = forest.loops[l].parent;
        while let Some(q) = p {
            d += 1;
            p = forest.loops[q].parent;
        }
        forest.loops[l].depth = d;
    }
    for w in 0..m {
        let node = node_of[w];
        forest.heads[node] = loop_of[w];
        forest.innermost[node] = match loop_of[w] {
            Some(l) => Some(l),
            None => header[w].and_then(|h| loop_of[h]),
        };
    }
    forest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
        let mut g = vec![Vec::new(); n];
        for &(a, b) in edges {
            g[a].push(b);
        }
        g
    }

    #[test]
    fn single_loop() {
        // 0 -> 1 -> 2 -> 1, 2 -> 3
        let f = loop_forest(&graph(4, &[(0, 1), (1, 2), (2, 1), (2, 3)]), 0);
        assert_eq!(f.loops.len(), 1);
        assert_eq!(f.loops[0].header, 1);
        assert_eq!(f.innermost, vec![None, Some(0), Some(0), None]);
        assert!(f.contains(0, 2) && !f.contains(0, 3));
    }

    #[test]
    fn nested_loops() {
        // 0 -> 1 (outer header) -> 2 (inner header) -> 3 -> 2, 3 -> 4 -> 1, 4 -> 5
        let g = graph(6, &[(0, 1), (1, 2), (2, 3), (3, 2), (3, 4), (4, 1), (4, 5)]);
        let f = loop_forest(&g, 0);
        assert_eq!(f.loops.len(), 2);
        let outer = f.heads[1].unwrap();
        let inner = f.heads[2].unwrap();
        assert_eq!(f.loops[inner].parent, Some(outer));
        assert_eq!(f.loops[inner].depth, 2);
        assert_eq!(f.loops[outer].depth, 1);
        assert_eq!(f.innermost[3], Some(inner));
        assert_eq!(f.innermost[4], Some(outer));
        assert!(f.contains(outer, 3));
        assert!(!f.contains(inner, 4));
    }

    #[test]
    fn self_loop() {
        let f = loop_forest(&graph(2, &[(0, 0), (0, 1)]), 0);
        assert_eq!(f.loops.len(), 1);
        assert_eq!(f.heads[0], Some(0));
    }

    #[test]
    fn irreducible_loop_has_one_header_and_both_entries_inside() {
        // 0 -> 1, 0 -> 2, 1 -> 2, 2 -> 1, 2 -> 3: the cycle {1, 2} has two entries.
        let f = loop_forest(&graph(4, &[(0, 1), (0, 2), (1, 2), (2, 1), (2, 3)]), 0);
        assert_eq!(f.loops.len(), 1);
        assert!(f.loops[0].irreducible);
        assert!(f.contains(0, 1) && f.contains(0, 2) && !f.contains(0, 3));
    }

    #[test]
    fn unreachable_nodes_are_in_no_loop() {
        let f = loop_forest(&graph(3, &[(1, 2), (2, 1)]), 0);
        assert!(f.loops.is_empty());
        assert_eq!(f.innermost, vec![None; 3]);
    }
}
